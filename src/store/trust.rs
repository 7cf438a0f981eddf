//! SQL of the private registries a VNF's nodes trust (tables `vnf_registry`,
//! `node_registry_trust`, view `registry_nodes`; `migrations/V11__registry_trust.sql`).

use rusqlite::params;

use super::decode::Cells;
use super::{ReaderRef, Result, Tx, collect_checked};
use vnfkeeper_core::flavour::trust::{NodeTrust, RegistryUse};
use vnfkeeper_core::model::{Timestamp, VnfInstanceId, VnfcId};
use vnfkeeper_core::wire::params::ConnectionType;

fn type_code(t: ConnectionType) -> i64 {
    match t {
        ConnectionType::Http => 0,
        ConnectionType::Https => 1,
    }
}

impl Tx<'_> {
    /// Records that a `trust.*` step of node `vnfc_instance_id` of `vnf_instance_id` ended DONE
    /// at `now`: the instance's `registries` upserted, the node verified now and, when the step
    /// `applied` a change, applied now. Errors: the store's (a node without a VNFC row fails
    /// the foreign key).
    pub fn record_node_trust(
        &mut self,
        vnf_instance_id: &VnfInstanceId,
        vnfc_instance_id: &VnfcId,
        registries: &[RegistryUse],
        applied: bool,
        now: Timestamp,
    ) -> Result<()> {
        let at = now.to_rfc3339();
        for r in registries {
            self.tx.execute(
                "INSERT INTO vnf_registry (vnf_instance_id, server, connection_type, ca_sha256, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (vnf_instance_id, server) DO UPDATE
                 SET connection_type = ?3, ca_sha256 = ?4, updated_at = ?5",
                params![
                    vnf_instance_id.as_str(),
                    r.server,
                    type_code(r.connection_type),
                    r.ca_sha256,
                    at
                ],
            )?;
        }
        let applied_at = applied.then_some(at.clone());
        self.tx.execute(
            "INSERT INTO node_registry_trust (vnfc_instance_id, vnf_instance_id, applied_at, verified_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (vnfc_instance_id) DO UPDATE
             SET vnf_instance_id = ?2, applied_at = COALESCE(?3, applied_at), verified_at = ?4",
            params![vnfc_instance_id.as_str(), vnf_instance_id.as_str(), applied_at, at],
        )?;
        Ok(())
    }
}

impl Tx<'_> {
    /// Sets `verified_at` of node `vnfc_instance_id` to `now` (a reconcile pass whose trust
    /// probes all found it in place). Nothing when the node has no trust row yet.
    pub fn verify_node_trust(&mut self, vnfc_instance_id: &VnfcId, now: Timestamp) -> Result<()> {
        self.tx.execute(
            "UPDATE node_registry_trust SET verified_at = ?2 WHERE vnfc_instance_id = ?1",
            params![vnfc_instance_id.as_str(), now.to_rfc3339()],
        )?;
        Ok(())
    }
}

/// The columns both reads select, in [`node_trust_from_row`]'s order.
const TRUST_SELECT: &str =
    "SELECT r.vnf_instance_id, r.server, r.connection_type, r.ca_sha256, t.vnfc_instance_id,
            t.applied_at, t.verified_at
     FROM vnf_registry r
     LEFT JOIN node_registry_trust t ON t.vnf_instance_id = r.vnf_instance_id";

fn node_trust_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<NodeTrust>> {
    let vnf_instance_id: String = r.get(0)?;
    let server: String = r.get(1)?;
    let code: i64 = r.get(2)?;
    let ca_sha256: Option<String> = r.get(3)?;
    let vnfc: Option<String> = r.get(4)?;
    let applied: Option<String> = r.get(5)?;
    let verified: Option<String> = r.get(6)?;
    let key = format!("{vnf_instance_id}/{server}");
    Ok((|| {
        let c = Cells::new("vnf_registry", &key);
        let connection_type = match code {
            0 => ConnectionType::Http,
            1 => ConnectionType::Https,
            other => {
                return Err(c.corrupt("connection_type", format!("{other} is not 0 or 1")));
            }
        };
        Ok(NodeTrust {
            applied_at: c.opt_time("applied_at", applied)?,
            verified_at: c.opt_time("verified_at", verified)?,
            vnf_instance_id,
            registry: RegistryUse {
                server,
                connection_type,
                ca_sha256,
            },
            vnfc_instance_id: vnfc,
        })
    })())
}

impl ReaderRef<'_> {
    /// The registries of `vnf_instance_id` with every node that recorded trust of them (one
    /// item per registry and node; a registry without nodes once, with `vnfc_instance_id`
    /// `None`), ordered by server and node. Errors: the store's; a row that does not decode.
    pub fn registry_trust(&self, vnf_instance_id: &VnfInstanceId) -> Result<Vec<NodeTrust>> {
        let mut st = self.conn.prepare_cached(&format!(
            "{TRUST_SELECT} WHERE r.vnf_instance_id = ?1 ORDER BY r.server, t.vnfc_instance_id"
        ))?;
        collect_checked(st.query_map([vnf_instance_id.as_str()], node_trust_from_row)?)
    }

    /// [`ReaderRef::registry_trust`] of every VNF instance in one query (what `status` lists),
    /// by instance id; instances without registries are absent. Errors: as `registry_trust`.
    pub fn registry_trust_all(&self) -> Result<std::collections::BTreeMap<String, Vec<NodeTrust>>> {
        let mut st = self.conn.prepare(&format!(
            "{TRUST_SELECT} ORDER BY r.vnf_instance_id, r.server, t.vnfc_instance_id"
        ))?;
        let mut out = std::collections::BTreeMap::<String, Vec<NodeTrust>>::new();
        for n in collect_checked(st.query_map([], node_trust_from_row)?)? {
            out.entry(n.vnf_instance_id.clone()).or_default().push(n);
        }
        Ok(out)
    }
}
