//! Validation of the SOL003 bodies and their `additionalParams`, on the raw JSON value, so that
//! every defect is reported with its pointer. Package-relative paths met on the way are
//! collected for [`super::LcmEnvelope::package_paths`], and the pointers of secret values for
//! [`super::LcmEnvelope::secret_pointers`].

use serde_json::Value;

use super::LcmOperation;
use super::check::{Card, Checker, Obj, push};
use super::params::ConnectionType;
use super::rules::{self, json_type};

/// Validation state: defects, warnings, and the package paths found.
#[derive(Debug, Default)]
pub struct Walk {
    /// Defects and warnings.
    pub c: Checker,
    /// `(pointer, normalised package path)` in document order.
    pub paths: Vec<(String, String)>,
    /// Pointers of the secret values present (passwords, proxy URLs, registry logins,
    /// `accessInfo`), in document order.
    pub secrets: Vec<String>,
}

impl Walk {
    fn package_path<'a>(&mut self, o: &Obj<'a>, key: &str, card: Card) {
        if let Some((s, p)) = self.c.str_field(o, key, card)
            && let Some(norm) = self.c.rule(&p, key, rules::package_path(s))
        {
            self.paths.push((p, norm));
        }
    }

    fn name(&mut self, o: &Obj<'_>, key: &str, card: Card) -> Option<String> {
        self.c
            .str_rule(o, key, card, rules::resource_name)
            .map(|(s, _)| s.to_string())
    }

    fn username(&mut self, o: &Obj<'_>, key: &str) {
        self.c.str_rule(o, key, Card::One, rules::posix_username);
    }

    /// A secret string attribute: checked without echoing it, its pointer recorded when present.
    fn secret(&mut self, o: &Obj<'_>, key: &str, card: Card) -> bool {
        self.mark_secret(o, key);
        self.c
            .str_rule(o, key, card, rules::secret_nonempty)
            .is_some()
    }

    /// Records the pointer of `key` in `o` as a secret when it is present and not null.
    fn mark_secret(&mut self, o: &Obj<'_>, key: &str) {
        if !matches!(o.map.get(key), None | Some(Value::Null)) {
            self.secrets.push(push(&o.ptr, key));
        }
    }

    fn cidr(&mut self, o: &Obj<'_>, key: &str, card: Card) {
        if let Some((s, p)) = self.c.str_field(o, key, card)
            && let Some((_, Some(note))) = self.c.rule(&p, key, rules::cidr(s))
        {
            self.c.warn(&p, format!("{key}: {note}"));
        }
    }

    fn each_object<'a>(&mut self, arr: &'a [Value], ptr: &str, what: &str) -> Vec<Obj<'a>> {
        arr.iter()
            .enumerate()
            .filter_map(|(i, v)| self.c.object(v, &push(ptr, &i.to_string()), what))
            .collect()
    }
}

/// Validates the body of `op` at pointer `/request`.
pub fn request(w: &mut Walk, op: LcmOperation, body: &Value) {
    let Some(o) = w.c.object(body, "/request", "request") else {
        return;
    };
    match op {
        LcmOperation::Instantiate => instantiate(w, &o),
        LcmOperation::Scale => scale(w, &o),
        LcmOperation::Heal => heal(w, &o),
        LcmOperation::Terminate => terminate(w, &o),
        LcmOperation::ChangeExtConn => change_ext_conn(w, &o),
    }
}

fn instantiate(w: &mut Walk, o: &Obj<'_>) {
    w.c.known_keys(
        o,
        "InstantiateVnfRequest",
        &[
            "flavourId",
            "instantiationLevelId",
            "extVirtualLinks",
            "extManagedVirtualLinks",
            "vimConnectionInfo",
            "localizationLanguage",
            "additionalParams",
            "extensions",
            "vnfConfigurableProperties",
        ],
    );
    w.c.str_rule(o, "flavourId", Card::One, rules::identifier);
    w.c.str_rule(o, "instantiationLevelId", Card::Opt, rules::resource_name);
    w.c.str_rule(o, "localizationLanguage", Card::Opt, rules::plain_text);
    if let Some((arr, p)) = w.c.array(o, "extVirtualLinks", Card::Opt, false) {
        for vl in w.each_object(arr, &p, "ExtVirtualLinkData") {
            ext_virtual_link(w, &vl);
        }
    }
    if let Some((arr, p)) = w.c.array(o, "extManagedVirtualLinks", Card::Opt, false) {
        for vl in w.each_object(arr, &p, "ExtManagedVirtualLinkData") {
            w.c.str_rule(&vl, "id", Card::One, rules::plain_text);
            w.name(&vl, "vnfVirtualLinkDescId", Card::One);
            w.c.str_rule(&vl, "resourceId", Card::One, rules::plain_text);
            w.c.str_field(&vl, "vimConnectionId", Card::Opt);
            w.c.str_field(&vl, "resourceProviderId", Card::Opt);
        }
    }
    if let Some((v, p)) = w.c.field(o, "vimConnectionInfo", Card::Opt) {
        vim_connection_info(w, v, &p);
    }
    w.c.obj_field(o, "extensions", Card::Opt);
    w.c.obj_field(o, "vnfConfigurableProperties", Card::Opt);
    if let Some(ap) = w.c.obj_field(o, "additionalParams", Card::Opt) {
        instantiate_additional_params(w, &ap);
    }
}

fn ext_virtual_link(w: &mut Walk, vl: &Obj<'_>) {
    w.c.str_rule(vl, "id", Card::One, rules::plain_text);
    w.c.str_rule(vl, "resourceId", Card::One, rules::plain_text);
    w.c.str_field(vl, "vimConnectionId", Card::Opt);
    w.c.str_field(vl, "resourceProviderId", Card::Opt);
    w.c.array(vl, "extLinkPorts", Card::Opt, false);
    let Some((cps, p)) = w.c.array(vl, "extCps", Card::One, true) else {
        return;
    };
    for cp in w.each_object(cps, &p, "VnfExtCpData") {
        w.name(&cp, "cpdId", Card::One);
        let Some((cfg, cp_ptr)) = w.c.field(&cp, "cpConfig", Card::One) else {
            continue;
        };
        let configs: Vec<(&Value, String)> = match cfg {
            Value::Array(a) if a.is_empty() => {
                w.c.err(
                    &cp_ptr,
                    "cpConfig must have at least one item (cardinality 1..N)",
                );
                continue;
            }
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| (v, push(&cp_ptr, &i.to_string())))
                .collect(),
            Value::Object(m) if m.is_empty() => {
                w.c.err(
                    &cp_ptr,
                    "cpConfig must have at least one entry (cardinality 1..N)",
                );
                continue;
            }
            Value::Object(m) => m.iter().map(|(k, v)| (v, push(&cp_ptr, k))).collect(),
            other => {
                w.c.err(
                    &cp_ptr,
                    format!(
                        "cpConfig must be an array (v2.6.1) or an object (v3.3.1), found {}",
                        json_type(other)
                    ),
                );
                continue;
            }
        };
        for (v, ptr) in configs {
            let Some(cfg) = w.c.object(v, &ptr, "VnfExtCpConfig") else {
                continue;
            };
            w.c.str_field(&cfg, "cpInstanceId", Card::Opt);
            w.c.str_field(&cfg, "linkPortId", Card::Opt);
            let Some((pds, pp)) = w.c.array(&cfg, "cpProtocolData", Card::Opt, false) else {
                continue;
            };
            for pd in w.each_object(pds, &pp, "CpProtocolData") {
                w.c.str_rule(&pd, "layerProtocol", Card::One, |s| match s {
                    "IP_OVER_ETHERNET" | "IP_FOR_VIRTUAL_CP" => Ok(()),
                    _ => Err("must be IP_OVER_ETHERNET (or IP_FOR_VIRTUAL_CP)".into()),
                });
                let Some(ipoe) = w.c.obj_field(&pd, "ipOverEthernet", Card::Opt) else {
                    continue;
                };
                w.c.str_field(&ipoe, "macAddress", Card::Opt);
                let Some((addrs, ap)) = w.c.array(&ipoe, "ipAddresses", Card::Opt, false) else {
                    continue;
                };
                for a in w.each_object(addrs, &ap, "IpAddresses") {
                    w.c.str_rule(&a, "type", Card::One, |s| match s {
                        "IPV4" | "IPV6" => Ok(()),
                        _ => Err("must be IPV4 or IPV6".into()),
                    });
                    w.c.str_field(&a, "subnetId", Card::Opt);
                    if let Some((fixed, fp)) = w.c.array(&a, "fixedAddresses", Card::Opt, false) {
                        for (i, f) in fixed.iter().enumerate() {
                            let fptr = push(&fp, &i.to_string());
                            match f {
                                Value::String(s) => {
                                    w.c.rule(&fptr, "fixedAddresses item", rules::ip_address(s));
                                }
                                other => w.c.err(
                                    &fptr,
                                    format!(
                                        "fixedAddresses item must be a string, found {}",
                                        json_type(other)
                                    ),
                                ),
                            }
                        }
                    }
                }
            }
        }
    }
}

fn vim_connection_info(w: &mut Walk, v: &Value, p: &str) {
    let entries: Vec<(&Value, String, bool)> = match v {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, e)| (e, push(p, &i.to_string()), true))
            .collect(),
        Value::Object(m) => m.iter().map(|(k, e)| (e, push(p, k), false)).collect(),
        other => {
            w.c.err(
                p,
                format!(
                    "vimConnectionInfo must be an array (SOL003 v2.6.1) or an object keyed by id (v3.3.1), found {}",
                    json_type(other)
                ),
            );
            return;
        }
    };
    for (e, ep, list_form) in entries {
        let Some(vci) = w.c.object(e, &ep, "VimConnectionInfo") else {
            continue;
        };
        w.c.str_rule(
            &vci,
            "id",
            if list_form { Card::One } else { Card::Opt },
            rules::plain_text,
        );
        w.c.str_rule(&vci, "vimType", Card::One, rules::plain_text);
        w.c.str_field(&vci, "vimId", Card::Opt);
        w.c.obj_field(&vci, "interfaceInfo", Card::Opt);
        // accessInfo holds credentials: only its type is checked, nothing is echoed.
        w.mark_secret(&vci, "accessInfo");
        w.c.obj_field(&vci, "accessInfo", Card::Opt);
        w.c.obj_field(&vci, "extra", Card::Opt);
    }
}

fn instantiate_additional_params(w: &mut Walk, ap: &Obj<'_>) {
    if let Some(k8s) =
        w.c.obj_field(ap, "k8s_cluster_installation_param", Card::Opt)
    {
        k8s_cluster_installation_param(w, &k8s);
    }
    if let Some(reg) =
        w.c.obj_field(ap, "private_registry_installation_param", Card::Opt)
    {
        private_registry_installation_param(w, &reg);
    }
    const UD: &str = "lcm-operation-user-data";
    const UDC: &str = "lcm-operation-user-data-class";
    let has_ud = !matches!(ap.map.get(UD), None | Some(Value::Null));
    let has_udc = !matches!(ap.map.get(UDC), None | Some(Value::Null));
    w.package_path(ap, UD, Card::Opt);
    w.c.str_rule(ap, UDC, Card::Opt, rules::python_class);
    if has_ud && !has_udc {
        w.c.err(
            &push(&ap.ptr, UDC),
            format!("{UDC} is required when {UD} is given"),
        );
    }
    if has_udc && !has_ud {
        w.c.err(
            &push(&ap.ptr, UD),
            format!("{UD} is required when {UDC} is given"),
        );
    }
    w.c.obj_field(ap, "nfv", Card::Opt);
    if let Some(mp) = w.c.obj_field(ap, "maintenance_pause", Card::Opt) {
        w.c.known_keys(&mp, "maintenance_pause", &["reason", "until"]);
        w.c.str_rule(&mp, "reason", Card::Opt, |s| {
            rules::plain_text(s)?;
            match s.len() > 1024 {
                true => Err("longer than 1024 bytes".into()),
                false => Ok(()),
            }
        });
        w.c.str_rule(&mp, "until", Card::Opt, |s| {
            crate::model::Timestamp::parse(s).map(|_| ()).map_err(|e| {
                format!("expected an RFC 3339 time such as 2026-11-24T18:00:00Z ({e})")
            })
        });
    }
}

/// A parameter vnfkeeper accepts but does not act on: a warning at its pointer (recorded with
/// the accepted request), saying why, so that nothing is ignored silently.
fn not_acted_on(w: &mut Walk, o: &Obj<'_>, key: &str, why: &str) {
    if !matches!(o.map.get(key), None | Some(Value::Null)) {
        w.c.warn(&push(&o.ptr, key), format!("{key} is not acted on: {why}"));
    }
}

fn k8s_cluster_installation_param(w: &mut Walk, o: &Obj<'_>) {
    w.package_path(o, "script_path", Card::One);
    w.c.str_rule(o, "vim_name", Card::Opt, rules::plain_text);
    let kubespray = !matches!(o.map.get("ansible"), None | Some(Value::Null));
    if let Some(m) = w.c.obj_field(o, "master_node", Card::One) {
        node(w, &m);
        w.cidr(&m, "pod_cidr", Card::Opt);
        w.cidr(&m, "cluster_cidr", Card::Opt);
        w.name(&m, "cluster_cp_name", Card::One);
        w.name(&m, "cluster_fip_name", Card::Opt);
        if kubespray {
            not_acted_on(
                w,
                &m,
                "cluster_fip_name",
                "the kubespray cluster is reached through external_lb_param's load balancer",
            );
            not_acted_on(
                w,
                &m,
                "cluster_cp_name",
                "the kubespray cluster is reached through external_lb_param's load balancer",
            );
        }
    }
    if let Some(n) = w.c.obj_field(o, "worker_node", Card::One) {
        node(w, &n);
    }
    if let Some(p) = w.c.obj_field(o, "proxy", Card::Opt) {
        proxy(w, &p);
    }
    if let Some(a) = w.c.obj_field(o, "ansible", Card::Opt) {
        w.c.str_rule(&a, "ip_address", Card::One, |s| {
            rules::connectable_ip(s).map(|_| ())
        });
        w.username(&a, "username");
        w.secret(&a, "password", Card::One);
        w.c.str_rule(&a, "kubespray_root_path", Card::One, rules::absolute_dir);
        w.c.str_rule(
            &a,
            "transferring_inventory_path",
            Card::One,
            rules::absolute_dir,
        );
    }
    for (key, flavour) in [
        (
            "external_lb_param",
            "with `ansible` (the kubespray cluster)",
        ),
        (
            "storage_server",
            "without `ansible` (the kubeadm-script cluster)",
        ),
        (
            "pv_registration_params",
            "without `ansible` (the kubeadm-script cluster)",
        ),
    ] {
        let wanted = key == "external_lb_param";
        if kubespray != wanted && !matches!(o.map.get(key), None | Some(Value::Null)) {
            w.c.err(
                &push(&o.ptr, key),
                format!("{key} is supported only {flavour}"),
            );
        }
    }
    if let Some(lb) = w.c.obj_field(o, "external_lb_param", Card::Opt) {
        w.name(&lb, "ssh_cp_name", Card::One);
        w.username(&lb, "ssh_username");
        w.secret(&lb, "ssh_password", Card::One);
        w.package_path(&lb, "script_path", Card::One);
    }
    if let Some(ss) = w.c.obj_field(o, "storage_server", Card::Opt) {
        storage_server(w, &ss);
    }
    if let Some((arr, p)) = w.c.array(o, "pv_registration_params", Card::Opt, false) {
        for pv in w.each_object(arr, &p, "pv_registration_params item") {
            w.package_path(&pv, "pv_manifest_file_path", Card::One);
            w.name(&pv, "nfs_server_cp", Card::One);
        }
    }
    if let Some((arr, p)) =
        w.c.array(o, "private_registry_connection_info", Card::Opt, false)
    {
        for r in w.each_object(arr, &p, "private_registry_connection_info item") {
            registry_connection(w, &r);
        }
    }
}

/// Attributes common to `master_node` and `worker_node`.
fn node(w: &mut Walk, o: &Obj<'_>) {
    w.name(o, "aspect_id", Card::Opt);
    not_acted_on(
        w,
        o,
        "aspect_id",
        "vnfkeeper finds a role's VNFCs by the VDU of its ssh_cp_name",
    );
    w.name(o, "ssh_cp_name", Card::One);
    w.name(o, "nic_cp_name", Card::One);
    w.username(o, "username");
    w.secret(o, "password", Card::One);
}

fn proxy(w: &mut Walk, o: &Obj<'_>) {
    for key in ["http_proxy", "https_proxy"] {
        // May carry `user:password@`: a secret as a whole.
        w.mark_secret(o, key);
        if let Some((s, p)) = w.c.str_field(o, key, Card::Opt)
            && let Some(Some(note)) = w.c.rule(&p, key, rules::proxy_url(s))
        {
            w.c.warn(&p, format!("{key}: {note}"));
        }
    }
    if let Some((s, p)) = w.c.str_field(o, "no_proxy", Card::Opt) {
        for (i, entry) in s.split(',').map(str::trim).enumerate() {
            if entry.is_empty() {
                continue;
            }
            match rules::no_proxy_entry(entry) {
                Ok(None) => {}
                Ok(Some(note)) => w.c.warn(&p, format!("no_proxy entry {}: {note}", i + 1)),
                Err(reason) => w.c.err(&p, format!("no_proxy entry {} {reason}", i + 1)),
            }
        }
    }
    w.cidr(o, "k8s_node_cidr", Card::Opt);
    not_acted_on(
        w,
        o,
        "k8s_node_cidr",
        "no_proxy gets the pod and service CIDRs and the cluster IP, not each node address",
    );
}

fn storage_server(w: &mut Walk, o: &Obj<'_>) {
    w.name(o, "ssh_cp_name", Card::One);
    w.name(o, "nic_cp_name", Card::Opt);
    w.username(o, "username");
    w.secret(o, "password", Card::One);
    let mut mounts: Vec<String> = Vec::new();
    let mut volumes: Vec<String> = Vec::new();
    if let Some((arr, p)) = w.c.array(o, "cinder_volume_setup_params", Card::One, true) {
        for v in w.each_object(arr, &p, "cinder_volume_setup_params item") {
            if let Some(id) = w.name(&v, "volume_resource_id", Card::One) {
                if volumes.contains(&id) {
                    w.c.err(
                        &push(&v.ptr, "volume_resource_id"),
                        "volume_resource_id repeats an earlier item; each volume is set up once",
                    );
                }
                volumes.push(id);
            }
            if let Some((m, mp)) = w.c.str_rule(&v, "mount_to", Card::One, rules::absolute_dir) {
                if mounts.iter().any(|x| x == m) {
                    w.c.err(
                        &mp,
                        "mount_to repeats an earlier item; two volumes cannot share a mount point",
                    );
                }
                mounts.push(m.to_string());
            }
        }
    }
    if let Some((arr, p)) = w.c.array(o, "nfs_server_setup_params", Card::One, true) {
        for e in w.each_object(arr, &p, "nfs_server_setup_params item") {
            if let Some((d, dp)) =
                w.c.str_rule(&e, "export_dir", Card::One, rules::absolute_dir)
            {
                // An export outside every volume would share the storage server's root disk
                // read-write with the cluster (`/etc` included): refused.
                let under = mounts
                    .iter()
                    .any(|m| d == m || d.starts_with(&format!("{m}/")));
                if !mounts.is_empty() && !under {
                    w.c.err(
                        &dp,
                        format!(
                            "export_dir {d} is outside every mount_to ({}); it would export the storage server's root disk",
                            mounts.join(", ")
                        ),
                    );
                }
            }
            if let Some((s, tp)) = w.c.str_field(&e, "export_to", Card::One)
                && let Some((_, Some(note))) = w.c.rule(&tp, "export_to", rules::export_target(s))
            {
                w.c.warn(&tp, format!("export_to: {note}"));
            }
        }
    }
}

fn registry_connection(w: &mut Walk, o: &Obj<'_>) {
    let ct = match w.c.field(o, "connection_type", Card::One) {
        Some((v, p)) => {
            let ct = ConnectionType::from_value(v);
            if ct.is_none() {
                w.c.err(
                    &p,
                    "connection_type must be 0 (HTTP) or 1 (HTTPS), as \"0\"/\"1\" or an integer",
                );
            }
            ct
        }
        None => None,
    };
    w.c.str_rule(o, "server", Card::One, rules::server_address);
    w.secret(o, "username", Card::Opt);
    w.secret(o, "password", Card::Opt);
    let has = |k: &str| !matches!(o.map.get(k), None | Some(Value::Null));
    if has("username") && !has("password") {
        w.c.err(
            &push(&o.ptr, "password"),
            "password is required when username is given",
        );
    } else if has("password") && !has("username") {
        w.c.err(
            &push(&o.ptr, "username"),
            "username is required when password is given",
        );
    }
    if has("certificate_path") && ct == Some(ConnectionType::Http) {
        w.c.warn(
            &push(&o.ptr, "certificate_path"),
            "certificate_path is only used with connection_type 1 (HTTPS)",
        );
    }
    w.package_path(o, "certificate_path", Card::Opt);
    w.c.str_rule(o, "hosts_string", Card::Opt, rules::hosts_line);
}

fn private_registry_installation_param(w: &mut Walk, o: &Obj<'_>) {
    w.name(o, "ssh_cp_name", Card::One);
    w.username(o, "ssh_username");
    w.secret(o, "ssh_password", Card::One);
    w.package_path(o, "image_path", Card::Opt);
    if let Some((v, p)) = w.c.field(o, "port_no", Card::Opt) {
        w.c.rule(&p, "port_no", rules::port_number(v));
    }
    if let Some(px) = w.c.obj_field(o, "proxy", Card::Opt) {
        proxy(w, &px);
    }
    not_acted_on(
        w,
        o,
        "proxy",
        "the registry VM's Docker gets no proxy; the image comes from image_path or a pull",
    );
}

fn scale(w: &mut Walk, o: &Obj<'_>) {
    w.c.known_keys(
        o,
        "ScaleVnfRequest",
        &["type", "aspectId", "numberOfSteps", "additionalParams"],
    );
    w.c.str_rule(o, "type", Card::One, |s| match s {
        "SCALE_OUT" | "SCALE_IN" => Ok(()),
        _ => Err("must be SCALE_OUT or SCALE_IN".into()),
    });
    w.name(o, "aspectId", Card::One);
    if let Some((v, p)) = w.c.field(o, "numberOfSteps", Card::Opt) {
        match v.as_u64() {
            Some(n) if n >= 1 && n <= u64::from(u32::MAX) => {}
            Some(_) => w.c.err(&p, "numberOfSteps must be an integer >= 1"),
            None if v.is_number() => w.c.err(&p, "numberOfSteps must be an integer >= 1"),
            None => w.c.err(
                &p,
                format!(
                    "numberOfSteps must be an integer >= 1, found {}",
                    json_type(v)
                ),
            ),
        }
    }
    w.c.obj_field(o, "additionalParams", Card::Opt);
}

fn heal(w: &mut Walk, o: &Obj<'_>) {
    w.c.known_keys(
        o,
        "HealVnfRequest",
        &["vnfcInstanceId", "cause", "additionalParams", "healScript"],
    );
    if let Some((arr, p)) = w.c.array(o, "vnfcInstanceId", Card::Opt, false) {
        let mut seen: Vec<&str> = Vec::new();
        for (i, v) in arr.iter().enumerate() {
            let ip = push(&p, &i.to_string());
            match v {
                Value::String(s) => {
                    if w.c
                        .rule(&ip, "vnfcInstanceId item", rules::identifier(s))
                        .is_some()
                    {
                        if seen.contains(&s.as_str()) {
                            w.c.err(&ip, "vnfcInstanceId item repeats an earlier item");
                        }
                        seen.push(s);
                    }
                }
                other => w.c.err(
                    &ip,
                    format!(
                        "vnfcInstanceId item must be a string, found {}",
                        json_type(other)
                    ),
                ),
            }
        }
    }
    w.c.str_rule(o, "cause", Card::Opt, rules::plain_text);
    w.c.str_field(o, "healScript", Card::Opt);
    if let Some(ap) = w.c.obj_field(o, "additionalParams", Card::Opt) {
        w.c.bool_field(&ap, "all", Card::Opt);
        w.c.bool_field(&ap, "configuration_only", Card::Opt);
    }
}

fn terminate(w: &mut Walk, o: &Obj<'_>) {
    w.c.known_keys(
        o,
        "TerminateVnfRequest",
        &[
            "terminationType",
            "gracefulTerminationTimeout",
            "additionalParams",
        ],
    );
    let tt =
        w.c.str_rule(o, "terminationType", Card::One, |s| match s {
            "FORCEFUL" | "GRACEFUL" => Ok(()),
            _ => Err("must be FORCEFUL or GRACEFUL".into()),
        })
        .map(|(s, _)| s);
    if let Some((v, p)) = w.c.field(o, "gracefulTerminationTimeout", Card::Opt) {
        if v.as_u64().is_none() {
            let found = if v.is_number() {
                "a negative or fractional number"
            } else {
                json_type(v)
            };
            w.c.err(&p, format!("gracefulTerminationTimeout must be a non-negative integer (seconds), found {found}"));
        } else if tt == Some("FORCEFUL") {
            w.c.err(
                &p,
                "gracefulTerminationTimeout is only allowed with terminationType GRACEFUL",
            );
        }
    }
    w.c.obj_field(o, "additionalParams", Card::Opt);
}

/// ChangeExtVnfConnectivityRequest (SOL003 §5.5.2.11): `extVirtualLinks` 1..N (each checked as
/// at INSTANTIATE; a CP named by two VLs is refused: its ports could attach to only one),
/// `vimConnectionInfo` as at INSTANTIATE (`accessInfo` secret), `additionalParams` an object whose
/// `nfv`, if given, is an object.
fn change_ext_conn(w: &mut Walk, o: &Obj<'_>) {
    w.c.known_keys(
        o,
        "ChangeExtVnfConnectivityRequest",
        &["extVirtualLinks", "vimConnectionInfo", "additionalParams"],
    );
    if let Some((arr, p)) = w.c.array(o, "extVirtualLinks", Card::One, true) {
        let mut seen: Vec<&str> = Vec::new();
        for vl in w.each_object(arr, &p, "ExtVirtualLinkData") {
            ext_virtual_link(w, &vl);
            let cps = vl.map.get("extCps").and_then(Value::as_array);
            for (c, cp) in cps.into_iter().flatten().enumerate() {
                let Some(id) = cp.get("cpdId").and_then(Value::as_str) else {
                    continue;
                };
                if seen.contains(&id) {
                    w.c.err(
                        &format!("{}/extCps/{c}/cpdId", vl.ptr),
                        "cpdId is already named by an earlier extCps entry of this request",
                    );
                }
                seen.push(id);
            }
        }
    }
    if let Some((v, p)) = w.c.field(o, "vimConnectionInfo", Card::Opt) {
        vim_connection_info(w, v, &p);
    }
    if let Some(ap) = w.c.obj_field(o, "additionalParams", Card::Opt) {
        w.c.obj_field(&ap, "nfv", Card::Opt);
    }
}
