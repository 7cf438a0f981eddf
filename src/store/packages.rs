//! SQL of package snapshots (`migrations/V7__package_snapshot.sql`): which snapshot an
//! operation uses, and which package paths a SCALE check may need.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, params};

use super::{ReaderRef, Result, StoreError, Tx};
use vnfkeeper_core::model::{OpOccId, VnfInstanceId};
use vnfkeeper_core::package::PackageDigest;

impl ReaderRef<'_> {
    /// The snapshot an operation uses: its digest and the snapshot directory (`vnf_package`),
    /// or `None` for an operation without one (no package, or accepted before V7). Errors:
    /// [`StoreError::Corrupt`] for a digest that does not parse.
    pub fn package_snapshot(&self, op_id: &OpOccId) -> Result<Option<(PackageDigest, PathBuf)>> {
        let row: Option<(Option<String>, Option<String>)> = self
            .conn
            .query_row(
                "SELECT package_sha256, vnf_package FROM vnf_lcm_op_occ WHERE id = ?1",
                [op_id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((Some(digest), Some(dir))) = row else {
            return Ok(None);
        };
        let digest = digest.parse().map_err(|e| StoreError::Corrupt {
            table: "vnf_lcm_op_occ",
            row: op_id.to_string(),
            column: "package_sha256",
            reason: format!("{e}"),
        })?;
        Ok(Some((digest, PathBuf::from(dir))))
    }

    /// The package paths a SCALE of `vnf_instance_id` may be checked against: that of the
    /// instance's last COMPLETED INSTANTIATE and those of its unfinished INSTANTIATEs
    /// (distinct). Intake loads them before its write transaction.
    pub fn scale_base_packages(&self, vnf_instance_id: &VnfInstanceId) -> Result<Vec<String>> {
        let mut st = self.conn.prepare(
            "SELECT DISTINCT vnf_package FROM vnf_lcm_op_occ
             WHERE vnf_instance_id = ?1 AND operation = 'INSTANTIATE' AND vnf_package IS NOT NULL
               AND (operation_state NOT IN ('COMPLETED', 'FAILED', 'ROLLED_BACK')
                    OR seq = (SELECT max(seq) FROM vnf_lcm_op_occ
                              WHERE vnf_instance_id = ?1 AND operation = 'INSTANTIATE'
                                AND operation_state = 'COMPLETED'))",
        )?;
        let rows = st.query_map([vnf_instance_id.as_str()], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

impl Tx<'_> {
    /// Records the snapshot an accepted operation uses (its digest) and the operator's package
    /// path it was copied from (`source`, audit only).
    pub fn record_package_snapshot(
        &mut self,
        op_id: &OpOccId,
        digest: PackageDigest,
        source: &Path,
    ) -> Result<()> {
        self.tx
            .prepare_cached(
                "UPDATE vnf_lcm_op_occ SET package_sha256 = ?2, package_source = ?3,
                 epoch = COALESCE(?4, epoch) WHERE id = ?1",
            )?
            .execute(params![
                op_id.as_str(),
                digest.to_string(),
                source.to_string_lossy(),
                self.epoch.map(|e| e.0)
            ])?;
        Ok(())
    }
}
