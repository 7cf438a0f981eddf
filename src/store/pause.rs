//! SQL of maintenance pauses (table `maintenance_pause`, `migrations/V9__maintenance_pause.sql`):
//! set, lift and expire them, each with an audit event (`MAINTENANCE_PAUSED`,
//! `MAINTENANCE_RESUMED`).

use rusqlite::{OptionalExtension, params};
use serde_json::json;
use vnfkeeper_core::model::EventKind;

use super::decode::Cells;
use super::{NewEvent, ReaderRef, Result, Tx, collect_checked};
use vnfkeeper_core::model::{MaintenancePause, PauseScope, Timestamp};
use vnfkeeper_core::policy::pause_json;

const COLUMNS: &str = "scope, paused_by, reason, since, until";

fn decode(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<MaintenancePause>> {
    let scope: String = r.get(0)?;
    let c = Cells::new("maintenance_pause", &scope);
    let since: String = r.get(3)?;
    let until: Option<String> = r.get(4)?;
    Ok((|| {
        Ok(MaintenancePause {
            paused_by: r.get(1)?,
            reason: r.get(2)?,
            since: c.time("since", &since)?,
            until: c.opt_time("until", until)?,
            scope: PauseScope::from_key(&scope),
        })
    })())
}

impl ReaderRef<'_> {
    /// Every stored pause (in force or past its `until` but not yet expired by the loop),
    /// ordered by scope. Errors: the store's; a row that does not decode (`StoreError::Corrupt`).
    pub fn maintenance_pauses(&self) -> Result<Vec<MaintenancePause>> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {COLUMNS} FROM maintenance_pause ORDER BY scope"
        ))?;
        let rows = st.query_map([], decode)?;
        collect_checked(rows)
    }
}

impl Tx<'_> {
    fn pause_of(&self, scope: &PauseScope) -> Result<Option<MaintenancePause>> {
        let row = self
            .tx
            .query_row(
                &format!("SELECT {COLUMNS} FROM maintenance_pause WHERE scope = ?1"),
                [scope.as_key()],
                decode,
            )
            .optional()?;
        row.transpose()
    }

    /// Sets (or replaces) the pause of `p.scope` and appends a `MAINTENANCE_PAUSED` event
    /// (evidence: the pause, and the one it replaced, if any). Returns the replaced pause.
    pub fn set_maintenance_pause(
        &mut self,
        p: &MaintenancePause,
        now: Timestamp,
    ) -> Result<Option<MaintenancePause>> {
        let old = self.pause_of(&p.scope)?;
        self.tx.execute(
            "INSERT INTO maintenance_pause (scope, paused_by, reason, since, until)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (scope) DO UPDATE SET paused_by = ?2, reason = ?3, since = ?4, until = ?5",
            params![
                p.scope.as_key(),
                p.paused_by,
                p.reason,
                p.since.to_rfc3339(),
                p.until.map(Timestamp::to_rfc3339)
            ],
        )?;
        let what = match &p.scope {
            PauseScope::All => "maintenance pause of every VNF instance",
            PauseScope::Vnf(_) => "maintenance pause",
        };
        let message = format!(
            "{what} set: {}{}",
            p.describe(),
            if old.is_some() {
                " (replaces the earlier one)"
            } else {
                ""
            }
        );
        let evidence = json!({"pause": pause_json(p),
                              "replaced": old.as_ref().map(pause_json)})
        .to_string();
        self.append_event(
            &NewEvent {
                vnf_instance_id: p.scope.vnf_instance_id(),
                message: &message,
                evidence: Some(&evidence),
                ..NewEvent::of(EventKind::MaintenancePaused)
            },
            now,
        )?;
        Ok(old)
    }

    /// Lifts the pause of `scope` on `by`'s request and appends a `MAINTENANCE_RESUMED` event
    /// (`expired: false`). `None` (and no event) when there was none.
    pub fn lift_maintenance_pause(
        &mut self,
        scope: &PauseScope,
        by: &str,
        now: Timestamp,
    ) -> Result<Option<MaintenancePause>> {
        let Some(old) = self.pause_of(scope)? else {
            return Ok(None);
        };
        self.tx.execute(
            "DELETE FROM maintenance_pause WHERE scope = ?1",
            [scope.as_key()],
        )?;
        let message = format!("maintenance pause lifted by {by} (was {})", old.describe());
        self.resumed_event(&old, by, false, &message, now)?;
        Ok(Some(old))
    }

    /// Removes `p` if it is still stored unchanged (not replaced since it was read) and appends
    /// a `MAINTENANCE_RESUMED` event (`expired: true`). Returns whether it was removed.
    pub fn expire_maintenance_pause(
        &mut self,
        p: &MaintenancePause,
        now: Timestamp,
    ) -> Result<bool> {
        if self.pause_of(&p.scope)?.as_ref() != Some(p) {
            return Ok(false);
        }
        self.tx.execute(
            "DELETE FROM maintenance_pause WHERE scope = ?1",
            [p.scope.as_key()],
        )?;
        let message = format!(
            "maintenance pause ended at its until time (was {})",
            p.describe()
        );
        self.resumed_event(p, "reconcile (until reached)", true, &message, now)?;
        Ok(true)
    }

    fn resumed_event(
        &mut self,
        p: &MaintenancePause,
        by: &str,
        expired: bool,
        message: &str,
        now: Timestamp,
    ) -> Result<()> {
        let evidence = json!({"pause": pause_json(p), "by": by, "expired": expired}).to_string();
        self.append_event(
            &NewEvent {
                vnf_instance_id: p.scope.vnf_instance_id(),
                message,
                evidence: Some(&evidence),
                ..NewEvent::of(EventKind::MaintenanceResumed)
            },
            now,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    #[test]
    fn set_replace_lift_and_expire_each_leave_an_event() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let p = MaintenancePause {
            scope: PauseScope::Vnf("vnf-1".into()),
            paused_by: "uid 0 (root)".into(),
            reason: Some("disk swap".into()),
            since: t("2026-11-24T06:00:00Z"),
            until: Some(t("2026-11-24T08:00:00Z")),
        };
        let now = p.since;
        assert_eq!(
            store.write(|tx| tx.set_maintenance_pause(&p, now)).unwrap(),
            None
        );
        let all = MaintenancePause {
            scope: PauseScope::All,
            until: None,
            reason: None,
            ..p.clone()
        };
        store
            .write(|tx| tx.set_maintenance_pause(&all, now))
            .unwrap();
        assert_eq!(
            store.reader().maintenance_pauses().unwrap(),
            vec![all.clone(), p.clone()]
        );
        // Replaced: the expiry of the old one does nothing.
        let p2 = MaintenancePause {
            until: Some(t("2026-11-24T09:00:00Z")),
            ..p.clone()
        };
        assert_eq!(
            store
                .write(|tx| tx.set_maintenance_pause(&p2, now))
                .unwrap(),
            Some(p.clone())
        );
        assert!(
            !store
                .write(|tx| tx.expire_maintenance_pause(&p, now))
                .unwrap()
        );
        assert!(
            store
                .write(|tx| tx.expire_maintenance_pause(&p2, now))
                .unwrap()
        );
        assert_eq!(
            store
                .write(|tx| tx.lift_maintenance_pause(&PauseScope::All, "uid 0 (root)", now))
                .unwrap(),
            Some(all)
        );
        assert_eq!(
            store
                .write(|tx| tx.lift_maintenance_pause(&PauseScope::All, "uid 0 (root)", now))
                .unwrap(),
            None
        );
        assert!(store.reader().maintenance_pauses().unwrap().is_empty());
        let conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
        let kinds: Vec<(String, Option<String>, bool)> = conn
            .prepare("SELECT kind, vnf_instance_id, json_extract(evidence, '$.expired') IS 1 FROM event ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let v = Some("vnf-1".to_string());
        assert_eq!(
            kinds,
            vec![
                ("MAINTENANCE_PAUSED".into(), v.clone(), false),
                ("MAINTENANCE_PAUSED".into(), None, false),
                ("MAINTENANCE_PAUSED".into(), v.clone(), false),
                ("MAINTENANCE_RESUMED".into(), v, true),
                ("MAINTENANCE_RESUMED".into(), None, false),
            ]
        );
    }
}
