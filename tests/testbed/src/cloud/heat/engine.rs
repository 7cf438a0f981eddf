//! The stack engine: create, update (diff + replace marked/changed resources) and delete.
//!
//! Every action runs in the background. Resources are processed in dependency levels; the
//! resources of one level run in parallel. An update:
//! 1. deletes removed resources and replaces every resource in a FAILED state (including
//!    `CHECK_FAILED` after `mark_unhealthy`) — servers that reference a replaced volume or port
//!    are replaced with it. As Heat's convergence engine does, a replacement is created before
//!    the old resource is deleted (the old ones go once the update completes); before a server's
//!    replacement is created its ports are detached from it (Heat's `prepare_for_replace`), its
//!    volumes are not — Nova refuses a volume still attached to the old server;
//! 2. creates new resources, recurses into nested stacks (template resources, AutoScalingGroups),
//!    and compares the resolved properties of the others: servers whose properties other than
//!    `name`/`metadata` changed are replaced (new id, new host) — except `networks` whose `{port}`
//!    entries changed only their port (a port replaced for a new network or address): the
//!    interface is re-attached and the host moves to the new address, as Nova does —,
//!    ports/volumes are updated in place unless their network/fixed IPs (ports) or image/type
//!    (volumes) changed.
//!
//! AutoScalingGroup scale-in removes members in Heat's order: FAILED (e.g. marked unhealthy)
//! members first, then the oldest.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::Arc;

use chrono::Utc;
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use super::super::Cloud;
use super::super::ops::{NetReq, ServerSpec};
use super::super::state::{Inner, new_id, short_id};
use super::template::{
    Ctx, effective_params, find_file, parse_template, references, resource_defs,
};
use super::{Replaced, Res, Stack, is_template_type};

type Fut = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Inserts a new stack record (status `INIT_COMPLETE`) and returns its id.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert_stack(
    inner: &mut Inner,
    name: String,
    parent: Option<(String, String)>,
    top: Option<String>,
    template: Value,
    files: BTreeMap<String, String>,
    params_given: Map<String, Value>,
    opts: (bool, Option<u64>, Option<Value>),
) -> String {
    let id = new_id();
    let top = top.unwrap_or_else(|| id.clone());
    inner.stacks.insert(
        id.clone(),
        Stack {
            id: id.clone(),
            name,
            parent,
            top,
            template,
            files,
            params_given,
            params: Map::new(),
            action: "INIT".into(),
            status: "COMPLETE".into(),
            reason: String::new(),
            resources: Vec::new(),
            events: Vec::new(),
            created: Utc::now(),
            updated: None,
            deleted: None,
            disable_rollback: opts.0,
            timeout_mins: opts.1,
            tags: opts.2,
            replaced: Vec::new(),
        },
    );
    id
}

/// Runs `action` (`CREATE` or `UPDATE`) on a stack whose template/files/parameters are already set.
pub(crate) fn converge(cloud: Arc<Cloud>, sid: String, action: &'static str) -> Fut {
    Box::pin(async move {
        {
            let mut inner = cloud.lock();
            let s = inner.stacks.get_mut(&sid).ok_or("stack vanished")?;
            s.action = action.into();
            s.status = "IN_PROGRESS".into();
            s.reason = format!("Stack {action} started");
            if action == "UPDATE" {
                s.updated = Some(Utc::now());
            }
            s.stack_event();
        }
        let r = converge_inner(&cloud, &sid, action).await;
        let mut inner = cloud.lock();
        if let Some(s) = inner.stacks.get_mut(&sid) {
            match &r {
                Ok(()) => {
                    s.status = "COMPLETE".into();
                    s.reason = format!("Stack {action} completed successfully");
                }
                Err(e) => {
                    s.status = "FAILED".into();
                    s.reason = format!("Resource {action} failed: {e}");
                }
            }
            s.stack_event();
            let order: Vec<String> = s
                .template
                .get("resources")
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            s.resources.sort_by_key(|r| {
                order
                    .iter()
                    .position(|n| *n == r.name)
                    .unwrap_or(usize::MAX)
            });
        }
        r
    })
}

fn delete_priority(rtype: &str, nested: bool) -> u8 {
    if nested {
        return 0;
    }
    match rtype {
        "OS::Nova::Server" => 1,
        "OS::Cinder::Volume" => 3,
        "OS::Neutron::Subnet" => 4,
        "OS::Neutron::Net" => 5,
        _ => 2,
    }
}

async fn converge_inner(cloud: &Arc<Cloud>, sid: &str, action: &str) -> Result<(), String> {
    let _ = action;
    let (levels, to_delete, replace) = {
        let mut inner = cloud.lock();
        let s = inner.stacks.get_mut(sid).ok_or("stack vanished")?;
        s.params = effective_params(&s.template, &s.params_given)?;
        let (defs, levels) = resource_defs(&s.template, &s.files)?;
        let names: BTreeSet<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        for d in &defs {
            if let Some(r) = s.res_mut(&d.name) {
                r.deps = d.deps.clone();
            }
        }
        let mut replace: BTreeSet<String> = s
            .resources
            .iter()
            .filter(|r| names.contains(r.name.as_str()))
            .filter(|r| r.failed() || defs.iter().any(|d| d.name == r.name && d.rtype != r.rtype))
            .map(|r| r.name.clone())
            .collect();
        loop {
            let more: Vec<String> = defs
                .iter()
                .filter(|d| {
                    d.rtype == "OS::Nova::Server"
                        && !replace.contains(&d.name)
                        && s.res(&d.name).is_some()
                })
                .filter(|d| d.deps.iter().any(|x| replace.contains(x)))
                .map(|d| d.name.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            replace.extend(more);
        }
        let to_delete: Vec<String> = s
            .resources
            .iter()
            .filter(|r| !names.contains(r.name.as_str()))
            .map(|r| r.name.clone())
            .collect();
        (levels, to_delete, replace)
    };
    delete_resources(cloud, sid, to_delete).await?;
    for level in levels {
        let mut set = JoinSet::new();
        for name in level {
            let forced = replace.contains(&name);
            set.spawn(apply_resource(cloud.clone(), sid.to_string(), name, forced));
        }
        let mut errs = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errs.push(e),
                Err(e) => errs.push(format!("internal error: {e}")),
            }
        }
        if !errs.is_empty() {
            return Err(join_errors(errs));
        }
    }
    clean_up_replaced(cloud, sid).await
}

/// Heat's cleanup after a successful traversal: deletes what the update replaced (servers
/// before ports before volumes, as [`delete_resources`]); what fails to go stays listed.
async fn clean_up_replaced(cloud: &Arc<Cloud>, sid: &str) -> Result<(), String> {
    let pending = {
        let mut inner = cloud.lock();
        let s = inner.stacks.get_mut(sid).ok_or("stack vanished")?;
        std::mem::take(&mut s.replaced)
    };
    let mut groups: BTreeMap<u8, Vec<Replaced>> = BTreeMap::new();
    for r in pending {
        groups
            .entry(delete_priority(&r.rtype, r.nested.is_some()))
            .or_default()
            .push(r);
    }
    let mut errs = Vec::new();
    let mut left = Vec::new();
    for (_, group) in groups {
        let mut set = JoinSet::new();
        for r in group {
            let cloud = cloud.clone();
            set.spawn(async move {
                let res = delete_physical(&cloud, &r.rtype, &r.physical_id, r.nested.clone()).await;
                (r, res)
            });
        }
        while let Some(j) = set.join_next().await {
            match j {
                Ok((_, Ok(()))) => {}
                Ok((r, Err(e))) => {
                    errs.push(format!("cleanup of {} {}: {e}", r.rtype, r.physical_id));
                    left.push(r);
                }
                Err(e) => errs.push(format!("internal error: {e}")),
            }
        }
    }
    if let Some(s) = cloud.lock().stacks.get_mut(sid) {
        s.replaced.extend(left);
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(join_errors(errs))
    }
}

/// Heat's `prepare_for_replace` of a server (`Server.prepare_ports_for_replace`): before the
/// replacement is created, the old server's ports are detached from it, so that the
/// replacement can take the template's ports. Volumes are not detached: a volume the
/// replacement's block device mapping names is still attached to the old server, and Nova
/// refuses it. Heat skips the detach for a server in `ERROR` (it only deletes the ports it
/// created itself, which the simulation's replacement never reuses), so the replacement of a
/// server in `ERROR` that names a template port fails as with Nova: the port is still in use.
async fn prepare_server_replace(cloud: &Arc<Cloud>, server_id: &str) -> Result<(), String> {
    let orphaned = {
        let mut inner = cloud.lock();
        let Some(ports) = inner
            .servers
            .get(server_id)
            .filter(|s| s.status != "ERROR")
            .map(|s| s.ports.clone())
        else {
            return Ok(());
        };
        let mut orphaned = false;
        for p in ports {
            orphaned = cloud.interface_detach(&mut inner, server_id, &p)?;
        }
        orphaned
    };
    if orphaned && let Some(farm) = &cloud.farm {
        farm.stop(server_id)
            .await
            .map_err(|e| format!("detaching the ports of {server_id}: {e:#}"))?;
    }
    Ok(())
}

/// Deletes resources of a stack by priority (nested stacks, servers, ports & others, volumes,
/// subnets, networks); each priority group in parallel.
async fn delete_resources(cloud: &Arc<Cloud>, sid: &str, names: Vec<String>) -> Result<(), String> {
    let mut groups: BTreeMap<u8, Vec<String>> = BTreeMap::new();
    {
        let inner = cloud.lock();
        let s = inner.stacks.get(sid).ok_or("stack vanished")?;
        for n in names {
            if let Some(r) = s.res(&n) {
                groups
                    .entry(delete_priority(&r.rtype, r.nested.is_some()))
                    .or_default()
                    .push(n);
            }
        }
    }
    for (_, group) in groups {
        let mut set = JoinSet::new();
        for name in group {
            let cloud = cloud.clone();
            let sid = sid.to_string();
            set.spawn(async move { delete_one(&cloud, &sid, &name).await });
        }
        let mut errs = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errs.push(e),
                Err(e) => errs.push(format!("internal error: {e}")),
            }
        }
        if !errs.is_empty() {
            return Err(join_errors(errs));
        }
    }
    Ok(())
}

async fn delete_one(cloud: &Arc<Cloud>, sid: &str, name: &str) -> Result<(), String> {
    let (rtype, pid, nested) = {
        let mut inner = cloud.lock();
        let Some(s) = inner.stacks.get_mut(sid) else {
            return Ok(());
        };
        let Some(r) = s.res_mut(name) else {
            return Ok(());
        };
        r.action = "DELETE".into();
        r.status = "IN_PROGRESS".into();
        r.reason = "state changed".into();
        let out = (r.rtype.clone(), r.physical_id.clone(), r.nested.clone());
        s.res_event(name);
        out
    };
    let res = delete_physical(cloud, &rtype, &pid, nested).await;
    let mut inner = cloud.lock();
    let Some(s) = inner.stacks.get_mut(sid) else {
        return Ok(());
    };
    match res {
        Ok(()) => {
            if let Some(r) = s.res_mut(name) {
                r.status = "COMPLETE".into();
            }
            s.res_event(name);
            s.resources.retain(|r| r.name != name);
            Ok(())
        }
        Err(e) => {
            if let Some(r) = s.res_mut(name) {
                r.status = "FAILED".into();
                r.reason = e.clone();
            }
            s.res_event(name);
            Err(format!("resources.{name}: {e}"))
        }
    }
}

async fn delete_physical(
    cloud: &Arc<Cloud>,
    rtype: &str,
    pid: &str,
    nested: Option<String>,
) -> Result<(), String> {
    if let Some(child) = nested {
        return delete_stack(cloud.clone(), child).await;
    }
    if pid.is_empty() {
        return Ok(());
    }
    match rtype {
        "OS::Nova::Server" => cloud.server_delete(pid).await,
        "OS::Neutron::Port" => {
            let mut inner = cloud.lock();
            cloud.port_delete(&mut inner, pid);
            Ok(())
        }
        "OS::Cinder::Volume" => cloud.volume_delete(pid).await,
        "OS::Neutron::FloatingIP" => cloud.floating_ip_delete(pid).await,
        "OS::Neutron::Net" => {
            let mut inner = cloud.lock();
            if pid != cloud.default_net && !inner.ports.values().any(|p| p.network_id == pid) {
                inner.networks.remove(pid);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Deletes a stack and everything in it. Nested stacks disappear; a top-level stack stays
/// visible by id as `DELETE_COMPLETE`.
pub(crate) fn delete_stack(cloud: Arc<Cloud>, sid: String) -> Fut {
    Box::pin(async move {
        let names = {
            let mut inner = cloud.lock();
            let Some(s) = inner.stacks.get_mut(&sid) else {
                return Ok(());
            };
            s.mark_delete_in_progress();
            s.resources
                .iter()
                .map(|r| r.name.clone())
                .collect::<Vec<_>>()
        };
        let mut r = delete_resources(&cloud, &sid, names).await;
        if r.is_ok() {
            r = clean_up_replaced(&cloud, &sid).await;
        }
        let mut inner = cloud.lock();
        let nested = inner.stacks.get(&sid).is_some_and(|s| s.parent.is_some());
        match &r {
            Ok(()) if nested => {
                inner.stacks.remove(&sid);
            }
            Ok(()) => {
                if let Some(s) = inner.stacks.get_mut(&sid) {
                    s.status = "COMPLETE".into();
                    s.reason = "Stack DELETE completed successfully".into();
                    s.deleted = Some(Utc::now());
                    s.stack_event();
                }
            }
            Err(e) => {
                if let Some(s) = inner.stacks.get_mut(&sid) {
                    s.status = "FAILED".into();
                    s.reason = format!("Resource DELETE failed: {e}");
                    s.stack_event();
                }
            }
        }
        r
    })
}

/// Joins resource errors; long lists are cut after three (a 1,000-member group failing for one
/// reason would otherwise produce a megabyte-long `stack_status_reason`).
fn join_errors(mut errs: Vec<String>) -> String {
    errs.sort();
    let n = errs.len();
    if n > 3 {
        errs.truncate(3);
        errs.push(format!("and {} more", n - 3));
    }
    errs.join("; ")
}

enum Plan {
    Nothing,
    Create,
    InPlace,
    Replace,
    Nested(String),
}

fn def_deps(def: &Value) -> Vec<String> {
    let mut refs = BTreeSet::new();
    if let Some(p) = def.get("properties") {
        let _ = references(p, &mut refs);
    }
    match def.get("depends_on") {
        Some(Value::String(s)) => {
            refs.insert(s.clone());
        }
        Some(Value::Array(a)) => refs.extend(a.iter().filter_map(Value::as_str).map(String::from)),
        _ => {}
    }
    refs.into_iter().collect()
}

fn needs_replace(rtype: &str, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value, keys: &[&str]| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            for k in keys {
                m.remove(*k);
            }
        }
        v
    };
    match rtype {
        "OS::Nova::Server" => {
            let keys = ["name", "metadata", "networks"];
            strip(old, &keys) != strip(new, &keys)
                || !ports_only(old.get("networks"), new.get("networks"))
        }
        "OS::Neutron::Port" => {
            old.get("network") != new.get("network")
                || old.get("network_id") != new.get("network_id")
                || old.get("fixed_ips") != new.get("fixed_ips")
        }
        "OS::Cinder::Volume" => {
            old.get("image") != new.get("image") || old.get("volume_type") != new.get("volume_type")
        }
        _ => false,
    }
}

/// Whether two `networks` properties of a server are equal or differ only in the ports of
/// `{port: …}` entries, position by position: Nova re-attaches the interfaces, the server stays
/// (Heat's in-place update of `networks`).
fn ports_only(old: Option<&Value>, new: Option<&Value>) -> bool {
    if old == new {
        return true;
    }
    let port_list = |v: Option<&Value>| -> Option<Vec<String>> {
        v?.as_array()?
            .iter()
            .map(|e| {
                let m = e.as_object()?;
                (m.len() == 1).then_some(())?;
                m.get("port")?.as_str().map(str::to_owned)
            })
            .collect()
    };
    matches!((port_list(old), port_list(new)), (Some(a), Some(b)) if a.len() == b.len())
}

/// A server's `networks` changed only in its ports (see [`ports_only`]): its port list becomes
/// the new ports (the replaced ones were deleted, which detached them). Returns the server id
/// and its first address (the host moves there if it is elsewhere).
fn swap_ports(
    cloud: &Cloud,
    sid: &str,
    name: &str,
    old: Option<&Value>,
    new: &Value,
) -> Option<(String, Ipv4Addr)> {
    let ids = |v: Option<&Value>| -> Vec<String> {
        v.and_then(|v| v.get("networks"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("port").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let (before, after) = (ids(old), ids(Some(new)));
    if before == after || before.len() != after.len() {
        return None;
    }
    let mut inner = cloud.lock();
    let pid = inner.stacks.get(sid)?.res(name)?.physical_id.clone();
    for o in before.iter().filter(|o| !after.contains(o)) {
        if let Some(p) = inner.ports.get_mut(o) {
            p.device_id.clear();
            p.device_owner.clear();
        }
    }
    for n in &after {
        if let Some(p) = inner.ports.get_mut(n) {
            p.device_id = pid.clone();
            p.device_owner = "compute:nova".to_string();
        }
    }
    let srv = inner.servers.get_mut(&pid)?;
    if srv.ports != after {
        // Its `addresses` change.
        srv.updated = Utc::now();
    }
    srv.ports = after.clone();
    let ip = inner.ports.get(after.first()?)?.ip;
    Some((pid, ip))
}

/// Brings one resource to its definition: create, update in place, recurse into its nested
/// stack, or replace (`forced`: marked unhealthy, failed, changed type, or a server whose
/// volume or port is replaced). A replacement is created before the old resource goes, as
/// Heat's convergence engine does: the old one is kept in [`Stack::replaced`] until the
/// update completes (a port is deleted at once, a server's ports are detached first).
fn apply_resource(cloud: Arc<Cloud>, sid: String, name: String, forced: bool) -> Fut {
    Box::pin(async move {
        let pfx = |e: String| format!("resources.{name}: {e}");
        let (rtype, props, deps, plan, old) = {
            let inner = cloud.lock();
            let s = inner.stacks.get(&sid).ok_or("stack vanished")?;
            let def = s.template["resources"][&name].clone();
            let rtype = def["type"].as_str().unwrap_or_default().to_string();
            let ctx = Ctx {
                inner: &inner,
                stack: s,
                cloud: &cloud,
            };
            let props = ctx
                .resolve(def.get("properties").unwrap_or(&json!({})))
                .map_err(pfx)?;
            let plan = match s.res(&name) {
                None => Plan::Create,
                Some(_) if forced => Plan::Replace,
                Some(r) => match &r.nested {
                    Some(c) => Plan::Nested(c.clone()),
                    None if r.props == props => Plan::Nothing,
                    None if needs_replace(&rtype, &r.props, &props) => Plan::Replace,
                    None => Plan::InPlace,
                },
            };
            let old = s.res(&name).map(|r| r.props.clone());
            (rtype, props, def_deps(&def), plan, old)
        };
        match plan {
            Plan::Nothing => Ok(()),
            Plan::Create => create_resource(&cloud, &sid, &name, &rtype, props, deps)
                .await
                .map_err(pfx),
            Plan::Replace if rtype == "OS::Neutron::Port" => {
                // Heat's replacement creates the new port before it deletes the old one (so the
                // new one gets another address, and a server re-attaches to it in place).
                let old_pid = cloud
                    .lock()
                    .stacks
                    .get(&sid)
                    .and_then(|s| s.res(&name))
                    .map(|r| r.physical_id.clone());
                create_resource(&cloud, &sid, &name, &rtype, props, deps)
                    .await
                    .map_err(pfx)?;
                if let Some(pid) = old_pid.filter(|p| !p.is_empty()) {
                    delete_physical(&cloud, &rtype, &pid, None)
                        .await
                        .map_err(pfx)?;
                }
                Ok(())
            }
            Plan::Replace => {
                let old = {
                    let mut inner = cloud.lock();
                    let s = inner.stacks.get_mut(&sid).ok_or("stack vanished")?;
                    let Some(r) = s.res(&name) else {
                        return Err(pfx("resource vanished".into()));
                    };
                    let old = Replaced {
                        rtype: r.rtype.clone(),
                        physical_id: r.physical_id.clone(),
                        nested: r.nested.clone(),
                    };
                    s.replaced.push(old.clone());
                    old
                };
                if old.rtype == "OS::Nova::Server" && !old.physical_id.is_empty() {
                    prepare_server_replace(&cloud, &old.physical_id)
                        .await
                        .map_err(pfx)?;
                }
                create_resource(&cloud, &sid, &name, &rtype, props, deps)
                    .await
                    .map_err(pfx)
            }
            Plan::InPlace => {
                let moved = (rtype == "OS::Nova::Server")
                    .then(|| swap_ports(&cloud, &sid, &name, old.as_ref(), &props))
                    .flatten();
                update_in_place(&cloud, &sid, &name, &rtype, props);
                if let (Some((server, ip)), Some(farm)) = (moved, cloud.farm.clone()) {
                    farm.readdress(&server, ip)
                        .await
                        .map_err(|e| pfx(format!("re-attach the interface: {e}")))?;
                }
                Ok(())
            }
            Plan::Nested(child) => update_nested(&cloud, &sid, &name, &rtype, props, child)
                .await
                .map_err(pfx),
        }
    })
}

fn set_res_state(cloud: &Cloud, sid: &str, name: &str, action: &str, result: &Result<(), String>) {
    let mut inner = cloud.lock();
    let Some(s) = inner.stacks.get_mut(sid) else {
        return;
    };
    if let Some(r) = s.res_mut(name) {
        r.action = action.into();
        match result {
            Ok(()) => {
                r.status = "COMPLETE".into();
                r.reason = "state changed".into();
            }
            Err(e) => {
                r.status = "FAILED".into();
                r.reason = e.clone();
            }
        }
        if action == "UPDATE" {
            r.updated = Some(Utc::now());
        }
        s.res_event(name);
    }
}

fn update_in_place(cloud: &Cloud, sid: &str, name: &str, rtype: &str, props: Value) {
    let mut inner = cloud.lock();
    let Some(pid) = inner
        .stacks
        .get(sid)
        .and_then(|s| s.res(name))
        .map(|r| r.physical_id.clone())
    else {
        return;
    };
    match rtype {
        "OS::Nova::Server" => {
            if let Some(s) = inner.servers.get_mut(&pid) {
                if let Some(n) = props.get("name").and_then(Value::as_str) {
                    s.name = n.to_string();
                }
                s.metadata = string_map(props.get("metadata"));
                s.updated = Utc::now();
            }
        }
        "OS::Neutron::Port" => {
            if let Some(p) = inner.ports.get_mut(&pid) {
                if let Some(n) = props.get("name").and_then(Value::as_str) {
                    p.name = n.to_string();
                }
                p.allowed_address_pairs = props
                    .get("allowed_address_pairs")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
            }
        }
        "OS::Cinder::Volume" => {
            if let Some(v) = inner.volumes.get_mut(&pid) {
                if let Some(n) = props.get("name").and_then(Value::as_str) {
                    v.name = n.to_string();
                }
                if let Some(sz) = num(props.get("size")) {
                    v.size = v.size.max(sz as u32);
                }
            }
        }
        _ => {}
    }
    if let Some(s) = inner.stacks.get_mut(sid)
        && let Some(r) = s.res_mut(name)
    {
        r.props = props;
        r.action = "UPDATE".into();
        r.status = "COMPLETE".into();
        r.reason = "state changed".into();
        r.updated = Some(Utc::now());
        s.res_event(name);
    }
}

fn num(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(String::from)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn nonempty_str(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Builds a server request from resolved `OS::Nova::Server` properties.
fn server_spec(props: &Value, default_name: String, cluster: String) -> Result<ServerSpec, String> {
    let mut spec = ServerSpec {
        name: nonempty_str(props.get("name")).unwrap_or(default_name),
        flavor: nonempty_str(props.get("flavor")).ok_or(
            "property 'flavor' is empty (check the get_param path into the nfv parameter)",
        )?,
        image: nonempty_str(props.get("image")).unwrap_or_default(),
        az: nonempty_str(props.get("availability_zone")),
        user_data: nonempty_str(props.get("user_data")),
        config_drive: match props.get("config_drive") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        },
        metadata: string_map(props.get("metadata")),
        key_name: nonempty_str(props.get("key_name")),
        cluster,
        ..Default::default()
    };
    let mut next_dev = b'b';
    for key in ["block_device_mapping_v2", "block_device_mapping"] {
        for b in props
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(vol) = nonempty_str(b.get("volume_id")) {
                let dev = nonempty_str(b.get("device_name")).unwrap_or_else(|| {
                    let d = format!("vd{}", next_dev as char);
                    next_dev += 1;
                    d
                });
                spec.volumes.push((vol, dev));
            } else if spec.image.is_empty()
                && let Some(img) =
                    nonempty_str(b.get("image")).or_else(|| nonempty_str(b.get("image_id")))
            {
                spec.image = img;
            }
        }
    }
    if spec.image.is_empty() {
        return Err(
            "property 'image' is empty and no block device mapping provides an image".into(),
        );
    }
    match props.get("networks") {
        None | Some(Value::Null) => {}
        Some(Value::Array(nets)) => {
            for n in nets {
                if let Some(p) = nonempty_str(n.get("port")) {
                    spec.networks.push(NetReq::Port(p));
                } else if let Some(net) =
                    nonempty_str(n.get("network")).or_else(|| nonempty_str(n.get("uuid")))
                {
                    let fixed_ip = match nonempty_str(n.get("fixed_ip")) {
                        Some(s) => Some(
                            s.parse::<Ipv4Addr>()
                                .map_err(|_| format!("fixed_ip {s:?} is not an IPv4 address"))?,
                        ),
                        None => None,
                    };
                    spec.networks.push(NetReq::Network { net, fixed_ip });
                } else if nonempty_str(n.get("subnet")).is_some() {
                    spec.networks.push(NetReq::Network {
                        net: "testbed-net".into(),
                        fixed_ip: None,
                    });
                } else {
                    return Err(format!(
                        "networks entry {n} names no port or network (empty get_param?)"
                    ));
                }
            }
        }
        Some(other) => return Err(format!("property 'networks' must be a list, got {other}")),
    }
    if spec.networks.is_empty() {
        spec.networks.push(NetReq::Network {
            net: "testbed-net".into(),
            fixed_ip: None,
        });
    }
    Ok(spec)
}

fn set_pid(inner: &mut Inner, sid: &str, name: &str, pid: &str, nested: Option<String>) {
    if let Some(r) = inner.stacks.get_mut(sid).and_then(|s| s.res_mut(name)) {
        r.physical_id = pid.to_string();
        r.nested = nested;
    }
}

async fn create_resource(
    cloud: &Arc<Cloud>,
    sid: &str,
    name: &str,
    rtype: &str,
    props: Value,
    deps: Vec<String>,
) -> Result<(), String> {
    let (stack_name, top, files) = {
        let mut inner = cloud.lock();
        let seq = inner.next_seq();
        let s = inner.stacks.get_mut(sid).ok_or("stack vanished")?;
        s.resources.retain(|r| r.name != name);
        s.resources.push(Res {
            name: name.to_string(),
            rtype: rtype.to_string(),
            action: "CREATE".into(),
            status: "IN_PROGRESS".into(),
            reason: "state changed".into(),
            physical_id: String::new(),
            props: props.clone(),
            created: Utc::now(),
            updated: None,
            seq,
            deps,
            nested: None,
        });
        s.res_event(name);
        (s.name.clone(), s.top.clone(), s.files.clone())
    };
    let default_name = format!("{stack_name}-{name}-{}", short_id());
    let r = create_physical(cloud, sid, name, rtype, &props, default_name, top, files).await;
    set_res_state(cloud, sid, name, "CREATE", &r);
    r
}

#[allow(clippy::too_many_arguments)]
async fn create_physical(
    cloud: &Arc<Cloud>,
    sid: &str,
    name: &str,
    rtype: &str,
    props: &Value,
    default_name: String,
    top: String,
    files: BTreeMap<String, String>,
) -> Result<(), String> {
    match rtype {
        "OS::Nova::Server" => {
            let spec = server_spec(props, default_name, top)?;
            let id = {
                let mut inner = cloud.lock();
                let id = cloud.server_begin(&mut inner, &spec)?;
                set_pid(&mut inner, sid, name, &id, None);
                id
            };
            cloud.server_boot(&id).await
        }
        "OS::Neutron::Port" => {
            let net = nonempty_str(props.get("network"))
                .or_else(|| nonempty_str(props.get("network_id")))
                .ok_or(
                    "property 'network' is empty (check the get_param path into the nfv parameter)",
                )?;
            let mut fixed = None;
            for f in props
                .get("fixed_ips")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(ip) = nonempty_str(f.get("ip_address")) {
                    fixed = Some(
                        ip.parse::<Ipv4Addr>()
                            .map_err(|_| format!("fixed_ips ip_address {ip:?} is not IPv4"))?,
                    );
                    break;
                }
            }
            let pname = nonempty_str(props.get("name")).unwrap_or(default_name);
            let aap = props
                .get("allowed_address_pairs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut inner = cloud.lock();
            let id = cloud.port_create(&mut inner, &net, &pname, fixed, aap)?;
            set_pid(&mut inner, sid, name, &id, None);
            Ok(())
        }
        "OS::Neutron::FloatingIP" => {
            let net = nonempty_str(props.get("floating_network"))
                .or_else(|| nonempty_str(props.get("floating_network_id")))
                .ok_or("property 'floating_network' is required")?;
            let port =
                nonempty_str(props.get("port_id")).or_else(|| nonempty_str(props.get("port")));
            let id = cloud.floating_ip_create(&net, port.as_deref()).await?;
            let mut inner = cloud.lock();
            set_pid(&mut inner, sid, name, &id, None);
            Ok(())
        }
        "OS::Cinder::Volume" => {
            let size = num(props.get("size"));
            let image = nonempty_str(props.get("image"));
            if size.is_none() && image.is_none() {
                return Err("property 'size' is required".into());
            }
            let vname = nonempty_str(props.get("name")).unwrap_or(default_name);
            let mut inner = cloud.lock();
            let id = cloud.volume_create(
                &mut inner,
                &vname,
                size.unwrap_or(1.0).ceil() as u32,
                nonempty_str(props.get("volume_type")).as_deref(),
                image.as_deref(),
                nonempty_str(props.get("availability_zone")).as_deref(),
            );
            set_pid(&mut inner, sid, name, &id, None);
            Ok(())
        }
        "OS::Neutron::Net" => {
            let nname = nonempty_str(props.get("name")).unwrap_or(default_name);
            let mut inner = cloud.lock();
            let id = inner.network_for(&nname, &new_id());
            set_pid(&mut inner, sid, name, &id, None);
            Ok(())
        }
        "OS::Heat::AutoScalingGroup" => {
            let (min, max, desired) = asg_sizes(props)?;
            let _ = (min, max);
            let (member_type, member_props) = asg_member(props)?;
            let names: Vec<String> = (0..desired).map(|_| short_id()).collect();
            let tpl = asg_template(&member_type, &member_props, &names);
            create_child(cloud, sid, name, tpl, files, Map::new()).await
        }
        t if is_template_type(t) => {
            let text =
                find_file(&files, t).ok_or_else(|| format!("template '{t}' not found in files"))?;
            let tpl =
                parse_template(&Value::String(text.clone())).map_err(|e| format!("{t}: {e}"))?;
            let params = props.as_object().cloned().unwrap_or_default();
            create_child(cloud, sid, name, tpl, files, params).await
        }
        _ => {
            let mut inner = cloud.lock();
            set_pid(&mut inner, sid, name, &new_id(), None);
            Ok(())
        }
    }
}

async fn create_child(
    cloud: &Arc<Cloud>,
    sid: &str,
    name: &str,
    tpl: Value,
    files: BTreeMap<String, String>,
    params: Map<String, Value>,
) -> Result<(), String> {
    let child = {
        let mut inner = cloud.lock();
        let (pname, top) = {
            let s = inner.stacks.get(sid).ok_or("stack vanished")?;
            (s.name.clone(), s.top.clone())
        };
        let child = insert_stack(
            &mut inner,
            format!("{pname}-{name}-{}", short_id()),
            Some((sid.to_string(), name.to_string())),
            Some(top),
            tpl,
            files,
            params,
            (true, None, None),
        );
        set_pid(&mut inner, sid, name, &child, Some(child.clone()));
        child
    };
    converge(cloud.clone(), child, "CREATE").await
}

fn asg_sizes(props: &Value) -> Result<(usize, usize, usize), String> {
    let min = num(props.get("min_size")).ok_or("property 'min_size' is required")? as usize;
    let max = num(props.get("max_size")).ok_or("property 'max_size' is required")? as usize;
    let desired = num(props.get("desired_capacity"))
        .map(|d| d as usize)
        .unwrap_or(min);
    if min > max {
        return Err(format!("min_size {min} is greater than max_size {max}"));
    }
    if desired < min || desired > max {
        return Err(format!(
            "desired_capacity {desired} must be between min_size {min} and max_size {max}"
        ));
    }
    Ok((min, max, desired))
}

fn asg_member(props: &Value) -> Result<(String, Value), String> {
    let r = props
        .get("resource")
        .ok_or("property 'resource' is required")?;
    let t = r
        .get("type")
        .and_then(Value::as_str)
        .ok_or("property 'resource.type' is required")?;
    Ok((
        t.to_string(),
        r.get("properties").cloned().unwrap_or_else(|| json!({})),
    ))
}

fn asg_template(member_type: &str, member_props: &Value, names: &[String]) -> Value {
    let mut res = Map::new();
    for n in names {
        res.insert(
            n.clone(),
            json!({"type": member_type, "properties": member_props}),
        );
    }
    json!({"heat_template_version": "2016-10-14", "resources": res})
}

async fn update_nested(
    cloud: &Arc<Cloud>,
    sid: &str,
    name: &str,
    rtype: &str,
    props: Value,
    child: String,
) -> Result<(), String> {
    {
        let mut inner = cloud.lock();
        let files = inner
            .stacks
            .get(sid)
            .map(|s| s.files.clone())
            .unwrap_or_default();
        let (tpl, params) = if rtype == "OS::Heat::AutoScalingGroup" {
            let (_, _, desired) = asg_sizes(&props)?;
            let (mt, mp) = asg_member(&props)?;
            let c = inner.stacks.get(&child).ok_or("nested stack vanished")?;
            let mut members: Vec<&Res> = c.resources.iter().collect();
            // Heat removes FAILED members first, then the oldest.
            members.sort_by_key(|m| (!m.failed(), m.seq, m.name.clone()));
            let keep_from = members.len().saturating_sub(desired);
            let mut kept: Vec<&Res> = members[keep_from..].to_vec();
            kept.sort_by_key(|m| (m.seq, m.name.clone()));
            let mut names: Vec<String> = kept.iter().map(|m| m.name.clone()).collect();
            while names.len() < desired {
                names.push(short_id());
            }
            (asg_template(&mt, &mp, &names), Map::new())
        } else {
            let text = find_file(&files, rtype)
                .ok_or_else(|| format!("template '{rtype}' not found in files"))?;
            let tpl = parse_template(&Value::String(text.clone()))
                .map_err(|e| format!("{rtype}: {e}"))?;
            (tpl, props.as_object().cloned().unwrap_or_default())
        };
        let c = inner
            .stacks
            .get_mut(&child)
            .ok_or("nested stack vanished")?;
        c.template = tpl;
        c.files = files;
        c.params_given = params;
        if let Some(s) = inner.stacks.get_mut(sid)
            && let Some(r) = s.res_mut(name)
        {
            r.action = "UPDATE".into();
            r.status = "IN_PROGRESS".into();
            r.props = props;
            s.res_event(name);
        }
    }
    let r = converge(cloud.clone(), child, "UPDATE").await;
    set_res_state(cloud, sid, name, "UPDATE", &r);
    r
}
