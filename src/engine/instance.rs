//! The instance an operation acts on, loaded from the store and the VNF package: its INSTANTIATE
//! request, the package, the flavour's driver over them (`vnfkeeper_core::flavour`), and its Heat stack.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Engine, EngineError, StepFailure};
use crate::cloud::{Cloud, StackRef};
use crate::store::InstanceRow;
use vnfkeeper_core::flavour::{self, Inputs, MgmtDriver};
use vnfkeeper_core::model::VnfInstanceId;
use vnfkeeper_core::package::VnfPackage;
use vnfkeeper_core::wire::sol003::{ChangeExtVnfConnectivityRequest, InstantiateVnfRequest};

/// An instance's INSTANTIATE request, its VNF package and its flavour.
pub(super) struct Instance {
    /// The InstantiateVnfRequest as accepted.
    pub req: InstantiateVnfRequest,
    /// The VNF package it named.
    pub pkg: VnfPackage,
    /// The flavour's driver (roles, access, hooks).
    pub driver: Box<dyn MgmtDriver>,
}

impl Instance {
    /// From a stored InstantiateVnfRequest and package path. The package files the flavour
    /// names are read now; one that cannot be read is left out, and a hook that needs it refuses
    /// with the path (a stored plan that already holds the stages does not need it).
    pub fn load(
        vnf_instance_id: &str,
        params: &str,
        package: Option<&str>,
    ) -> Result<Self, StepFailure> {
        let req: InstantiateVnfRequest = serde_json::from_str(params).map_err(|_| {
            StepFailure::input("plan", "stored InstantiateVnfRequest does not parse")
        })?;
        let package = package
            .ok_or_else(|| StepFailure::input("plan", "INSTANTIATE without a VNF package"))?;
        let mut pkg = VnfPackage::load(Path::new(package))
            .map_err(|err| StepFailure::input("plan", err.to_string()))?;
        pkg.vnfd = pkg
            .vnfd
            .for_flavour(&req.flavour_id)
            .map_err(|why| StepFailure::input("plan", why.to_string()))?
            .clone();
        let mut files = BTreeMap::new();
        for path in flavour::package_files(&req) {
            match pkg.read(&path) {
                Ok(bytes) => {
                    files.insert(path, bytes);
                }
                Err(err) => tracing::debug!(path, error = %err, "package file not read"),
            }
        }
        let hot = pkg.base_hot(&req.flavour_id).ok();
        let driver = flavour::select(Inputs {
            vnf_instance_id: vnf_instance_id.into(),
            req: req.clone(),
            vnfd: pkg.vnfd.clone(),
            files,
            base_hot: hot.as_ref().map(|b| b.template.clone()),
            floating_ip_ports: hot.map(|b| b.floating_ip_ports()).unwrap_or_default(),
        });
        Ok(Self { req, pkg, driver })
    }

    /// The instance of an INSTANTIATED VNF, from its last COMPLETED INSTANTIATE, its external
    /// VLs changed by the COMPLETED CHANGE_EXT_CONNs after it.
    pub fn of_instance<C: Cloud>(
        e: &Engine<C>,
        vnf_instance_id: &str,
    ) -> Result<Self, EngineError> {
        let (params, package) =
            e.db.with(|s| {
                s.reader()
                    .instantiate_request(&VnfInstanceId::from(vnf_instance_id))
            })?
            .ok_or_else(|| {
                StepFailure::input(
                    "plan",
                    format!("VNF instance `{vnf_instance_id}` has no completed INSTANTIATE"),
                )
            })?;
        let mut inst = Self::load(vnf_instance_id, &params, package.as_deref())?;
        // Completed CHANGE_EXT_CONNs since: the external VLs the instance has now.
        for body in e.db.with(|s| {
            s.reader()
                .ext_conn_changes(&VnfInstanceId::from(vnf_instance_id))
        })? {
            let change: ChangeExtVnfConnectivityRequest =
                serde_json::from_str(&body).map_err(|_| {
                    StepFailure::input(
                        "plan",
                        "a stored ChangeExtVnfConnectivityRequest does not parse",
                    )
                })?;
            inst.req.ext_virtual_links = vnfkeeper_core::plan::individual::changed_ext_links(
                &inst.req.ext_virtual_links,
                &change.ext_virtual_links,
            );
        }
        Ok(inst)
    }
}

/// The Heat stack name of an instance: `vnf-<vnfInstanceId>`.
pub(super) fn stack_name(vnf_instance_id: &str) -> String {
    format!("vnf-{vnf_instance_id}")
}

/// The instance row and its Heat stack (SCALE and HEAL act on an existing stack). Errors: the
/// instance vanished, or it has no stack id.
pub(super) fn instance_stack<C: Cloud>(
    e: &Engine<C>,
    vnf_instance_id: &str,
) -> Result<(InstanceRow, StackRef), EngineError> {
    let instance = instance_row(e, vnf_instance_id)?;
    let stack = StackRef {
        name: instance
            .stack_name
            .clone()
            .unwrap_or_else(|| stack_name(vnf_instance_id)),
        id: instance
            .stack_id
            .clone()
            .ok_or_else(|| StepFailure::input("plan", "the instance has no Heat stack"))?,
    };
    Ok((instance, stack))
}

/// The instance row. Errors: the instance vanished.
pub(super) fn instance_row<C: Cloud>(
    e: &Engine<C>,
    vnf_instance_id: &str,
) -> Result<InstanceRow, EngineError> {
    Ok(e.db
        .with(|s| s.reader().instances())?
        .into_iter()
        .find(|i| i.id == vnf_instance_id)
        .ok_or_else(|| StepFailure::input("plan", "VNF instance vanished"))?)
}
