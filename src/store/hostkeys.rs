//! SQL of pinned SSH host keys (`vnfc.host_key`): pinning at first contact and forgetting on an
//! operator's request, each with an audit event.

use rusqlite::{OptionalExtension, params};
use serde_json::json;

use super::{NewEvent, Result, Tx};
use vnfkeeper_core::console::FirstContact;
use vnfkeeper_core::model::{EventKind, Timestamp, VnfInstanceId, VnfcId};

/// What `vnfkeeper host-key forget` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgottenHostKey {
    /// vnfcInstanceId.
    pub vnfc_id: VnfcId,
    /// The VNF instance it belongs to.
    pub vnf_instance_id: VnfInstanceId,
    /// Nova server id, if known.
    pub server_id: Option<String>,
    /// The key that was pinned (OpenSSH line), `None` when none was.
    pub host_key: Option<String>,
}

impl Tx<'_> {
    /// Pins a VNFC's SSH host key (OpenSSH line `key`, SHA256 `fingerprint`) after a first
    /// contact verified as `how`, unless a key is pinned already; appends a `HOST_KEY_PINNED`
    /// event (evidence: `fingerprint`, `verified_by` = [`FirstContact::as_str`], `server_id`).
    /// Returns whether the key was pinned (false: already pinned, or no such VNFC).
    pub fn pin_host_key(
        &mut self,
        vnfc_id: &VnfcId,
        key: &str,
        fingerprint: &str,
        how: FirstContact,
        now: Timestamp,
    ) -> Result<bool> {
        let changed = self.tx.execute(
            "UPDATE vnfc SET host_key = ?2, updated_at = ?3 WHERE id = ?1 AND host_key IS NULL",
            params![vnfc_id.as_str(), key, now.to_rfc3339()],
        )?;
        if changed == 0 {
            return Ok(false);
        }
        let (instance, server): (String, Option<String>) = self.tx.query_row(
            "SELECT vnf_instance_id, server_id FROM vnfc WHERE id = ?1",
            [vnfc_id.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let message = match how {
            FirstContact::Console => {
                format!("host key {fingerprint} pinned, verified against the console")
            }
            FirstContact::TrustOnFirstUse => {
                format!("host key {fingerprint} pinned by trust on first use (no console listing)")
            }
        };
        let evidence = json!({"fingerprint": fingerprint, "verified_by": how.as_str(),
                              "server_id": server})
        .to_string();
        self.append_event(
            &NewEvent {
                kind: EventKind::HostKeyPinned,
                vnf_instance_id: Some(&VnfInstanceId::from(&instance)),
                vnf_lcm_op_occ_id: None,
                vnfc_id: Some(vnfc_id),
                message: &message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        Ok(true)
    }

    /// Removes the pinned host key of VNFC `vnfc_id` so that the next connection verifies the
    /// server again (console listing, else trust on first use), and appends a
    /// `HOST_KEY_FORGOTTEN` event naming `by` (who asked: a user name) with the removed key as
    /// evidence — also when none was pinned. `None` when there is no such VNFC.
    pub fn forget_host_key(
        &mut self,
        vnfc_id: &VnfcId,
        by: &str,
        now: Timestamp,
    ) -> Result<Option<ForgottenHostKey>> {
        let row: Option<(String, Option<String>, Option<String>)> = self
            .tx
            .query_row(
                "SELECT vnf_instance_id, server_id, host_key FROM vnfc WHERE id = ?1",
                [vnfc_id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((vnf_instance_id, server_id, host_key)) = row else {
            return Ok(None);
        };
        self.tx.execute(
            "UPDATE vnfc SET host_key = NULL, updated_at = ?2 WHERE id = ?1",
            params![vnfc_id.as_str(), now.to_rfc3339()],
        )?;
        let message = match &host_key {
            Some(_) => format!("pinned host key forgotten by {by}"),
            None => format!("host key forget by {by}: no key was pinned"),
        };
        let evidence = json!({"by": by, "host_key": host_key, "server_id": server_id}).to_string();
        self.append_event(
            &NewEvent {
                kind: EventKind::HostKeyForgotten,
                vnf_instance_id: Some(&VnfInstanceId::from(&vnf_instance_id)),
                vnf_lcm_op_occ_id: None,
                vnfc_id: Some(vnfc_id),
                message: &message,
                evidence: Some(&evidence),
            },
            now,
        )?;
        Ok(Some(ForgottenHostKey {
            vnfc_id: vnfc_id.clone(),
            vnf_instance_id: vnf_instance_id.into(),
            server_id,
            host_key,
        }))
    }
}

impl Tx<'_> {
    /// Pins the SSH host key of a host outside any VNF (the Ansible server) at `address` unless
    /// one is pinned already (`migrations/V8__external_host_keys.sql`). Returns whether it was
    /// pinned now.
    pub fn pin_external_host_key(
        &mut self,
        address: &str,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<bool> {
        let n = self.tx.execute(
            "INSERT OR IGNORE INTO external_host_key (address, host_key, fingerprint, pinned_at)
             VALUES (?1, ?2, ?3, ?4)",
            params![address, key, fingerprint, now.to_rfc3339()],
        )?;
        Ok(n == 1)
    }
}

impl super::ReaderRef<'_> {
    /// The pinned host key (OpenSSH line) of the host outside any VNF at `address`, if any.
    pub fn external_host_key(&self, address: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT host_key FROM external_host_key WHERE address = ?1",
                [address],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Every pinned host key of a host outside any VNF: address → OpenSSH line.
    pub fn external_host_keys(&self) -> Result<std::collections::HashMap<String, String>> {
        let mut st = self
            .conn
            .prepare("SELECT address, host_key FROM external_host_key")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }
}
