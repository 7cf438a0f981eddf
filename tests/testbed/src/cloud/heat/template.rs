//! HOT parsing, parameters, intrinsic functions and dependencies (HOT specification subset).
//!
//! Supported: `heat_template_version`, `description`, `parameter_groups`, `parameters` (types
//! `string`, `number`, `json`, `comma_delimited_list`, `boolean`; defaults), `resources`
//! (`type`, `properties`, `depends_on`, `metadata`, `update_policy`, `deletion_policy`),
//! `outputs`; functions `get_param` (with paths), `get_resource`, `get_attr` (with paths),
//! `get_file`, `str_replace`, `list_join`. Anything else (conditions, other functions) is an error
//! naming the construct.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::super::Cloud;
use super::super::state::Inner;
use super::{Stack, is_template_type};

/// Functions the testbed evaluates.
pub const SUPPORTED_FUNCTIONS: &[&str] = &[
    "get_param",
    "get_resource",
    "get_attr",
    "get_file",
    "str_replace",
    "list_join",
];

/// Known HOT function names (so that an unsupported one is reported, not taken as data).
const KNOWN_FUNCTIONS: &[&str] = &[
    "get_param",
    "get_resource",
    "get_attr",
    "get_file",
    "str_replace",
    "list_join",
    "repeat",
    "digest",
    "resource_facade",
    "str_split",
    "map_merge",
    "map_replace",
    "yaql",
    "equals",
    "if",
    "not",
    "and",
    "or",
    "contains",
    "filter",
    "make_url",
    "list_concat",
    "list_concat_unique",
    "str_replace_strict",
    "str_replace_vstrict",
    "Ref",
    "Fn::GetAtt",
    "Fn::Join",
    "Fn::Select",
    "Fn::Base64",
    "Fn::GetAZs",
    "Fn::Split",
    "Fn::Replace",
    "Fn::MemberListToMap",
    "Fn::ResourceFacade",
];

/// Parses a template given as a JSON object or a YAML/JSON string.
pub fn parse_template(v: &Value) -> Result<Value, String> {
    let t = match v {
        Value::String(s) => serde_yaml_ng::from_str::<Value>(s)
            .map_err(|e| format!("template is not valid YAML: {e}"))?,
        Value::Object(_) => v.clone(),
        _ => return Err("template must be an object or a YAML string".into()),
    };
    let Some(obj) = t.as_object() else {
        return Err("template must be a mapping".into());
    };
    if !obj.contains_key("heat_template_version") {
        return Err(
            "Template format version not found (heat_template_version is required).".into(),
        );
    }
    for k in obj.keys() {
        match k.as_str() {
            "heat_template_version"
            | "description"
            | "parameter_groups"
            | "parameters"
            | "resources"
            | "outputs" => {}
            "conditions" => {
                if !obj["conditions"].as_object().is_none_or(|m| m.is_empty()) {
                    return Err(
                        "template section 'conditions' is not supported by the testbed".into(),
                    );
                }
            }
            other => return Err(format!("Unknown key \"{other}\" in template")),
        }
    }
    // Heat's `list_join` takes one list up to HOT 2015-04-30 and several from 2015-10-15 on
    // (Heat's template guide, "list_join"); release-named versions are all later.
    let version = obj["heat_template_version"].as_str().unwrap_or("");
    if version.starts_with("20") && version < "2015-10-15" {
        for section in ["resources", "outputs"] {
            single_list_joins(&obj.get(section).cloned().unwrap_or(Value::Null), section)?;
        }
    }
    Ok(t)
}

/// Refuses a `list_join` with other than `[delimiter, list]` below `path`, as Heat validates
/// templates of versions before 2015-10-15.
fn single_list_joins(v: &Value, path: &str) -> Result<(), String> {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                if k == "list_join" && x.as_array().is_none_or(|a| a.len() != 2) {
                    return Err(format!(
                        "{p}: : Incorrect arguments to \"list_join\" should be: \"list_join\" : [ \" \", [ \"str1\", \"str2\"]]"
                    ));
                }
                single_list_joins(x, &p)?;
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                single_list_joins(x, &format!("{path}[{i}]"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Computes effective parameter values from the template's declarations and the given values.
pub fn effective_params(
    template: &Value,
    given: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let decls = template
        .get("parameters")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, decl) in &decls {
        let ty = decl.get("type").and_then(Value::as_str).unwrap_or("string");
        let raw = match given.get(name).or_else(|| decl.get("default")) {
            Some(v) => v.clone(),
            None => return Err(format!("The Parameter ({name}) was not provided.")),
        };
        let v = coerce(name, ty, raw)?;
        out.insert(name.clone(), v);
    }
    Ok(out)
}

fn coerce(name: &str, ty: &str, raw: Value) -> Result<Value, String> {
    let bad = |what: &str| format!("Parameter '{name}' is invalid: {what}");
    Ok(match ty {
        "string" => match raw {
            Value::String(_) | Value::Null => raw,
            Value::Number(n) => Value::String(n.to_string()),
            Value::Bool(b) => Value::String(b.to_string()),
            other => Value::String(other.to_string()),
        },
        "number" => match &raw {
            Value::Number(_) => raw,
            Value::String(s) => {
                let n: f64 = s
                    .trim()
                    .parse()
                    .map_err(|_| bad(&format!("could not convert {s:?} to number")))?;
                json!(n)
            }
            _ => return Err(bad("expected a number")),
        },
        "json" => match raw {
            Value::String(s) if s.trim().is_empty() => json!({}),
            Value::String(s) => {
                serde_json::from_str(&s).map_err(|e| bad(&format!("not valid JSON: {e}")))?
            }
            other => other,
        },
        "comma_delimited_list" => match raw {
            Value::String(s) if s.is_empty() => json!([]),
            Value::String(s) => Value::Array(
                s.split(',')
                    .map(|x| Value::String(x.trim().to_string()))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a),
            _ => return Err(bad("expected a comma-delimited list")),
        },
        "boolean" => match &raw {
            Value::Bool(_) => raw,
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" | "t" | "y" => Value::Bool(true),
                "false" | "no" | "off" | "0" | "f" | "n" => Value::Bool(false),
                _ => return Err(bad("expected a boolean")),
            },
            _ => return Err(bad("expected a boolean")),
        },
        other => {
            return Err(format!(
                "Parameter '{name}': unsupported parameter type '{other}'"
            ));
        }
    })
}

/// Serialises a typed parameter the way Heat shows it in `stack.parameters` (strings).
pub fn param_string(v: &Value) -> Value {
    match v {
        Value::String(_) | Value::Null => v.clone(),
        Value::Array(a) if a.iter().all(Value::is_string) => Value::String(
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
        ),
        other => Value::String(other.to_string()),
    }
}

/// If `v` is a function call (a one-key mapping whose key is a HOT function), returns (name, args).
pub fn as_function(v: &Value) -> Option<(&str, &Value)> {
    let m = v.as_object()?;
    if m.len() != 1 {
        return None;
    }
    let (k, a) = m.iter().next()?;
    KNOWN_FUNCTIONS
        .contains(&k.as_str())
        .then_some((k.as_str(), a))
}

/// Collects the resource names a snippet refers to via `get_resource`/`get_attr`, and reports the
/// first unsupported function.
pub fn references(v: &Value, out: &mut BTreeSet<String>) -> Result<(), String> {
    if let Some((f, args)) = as_function(v) {
        match f {
            "get_resource" => {
                if let Some(n) = args.as_str() {
                    out.insert(n.to_string());
                }
            }
            "get_attr" => {
                if let Some(n) = args
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(Value::as_str)
                {
                    out.insert(n.to_string());
                }
            }
            f if !SUPPORTED_FUNCTIONS.contains(&f) => {
                return Err(format!(
                    "intrinsic function '{f}' is not supported by the testbed (supported: {})",
                    SUPPORTED_FUNCTIONS.join(", ")
                ));
            }
            _ => {}
        }
        return references(args, out);
    }
    match v {
        Value::Array(a) => a.iter().try_for_each(|x| references(x, out)),
        Value::Object(m) => m.values().try_for_each(|x| references(x, out)),
        _ => Ok(()),
    }
}

/// A validated resource definition.
#[derive(Clone, Debug)]
pub struct ResDef {
    /// Logical name.
    pub name: String,
    /// Type.
    pub rtype: String,
    /// Unresolved properties.
    pub properties: Value,
    /// Resources this one depends on (references plus `depends_on`).
    pub deps: Vec<String>,
}

/// Validates the `resources` section and returns definitions in template order plus
/// dependency levels (each level's resources only depend on earlier levels).
pub fn resource_defs(
    template: &Value,
    files: &BTreeMap<String, String>,
) -> Result<(Vec<ResDef>, Vec<Vec<String>>), String> {
    let empty = Map::new();
    let res = match template.get("resources") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err("resources must be a mapping".into()),
    };
    let mut defs = Vec::new();
    for (name, def) in res {
        let e = |m: String| format!("resources.{name}: {m}");
        let Some(d) = def.as_object() else {
            return Err(e("definition must be a mapping".into()));
        };
        for k in d.keys() {
            match k.as_str() {
                "type" | "properties" | "depends_on" | "metadata" | "update_policy"
                | "deletion_policy" | "description" => {}
                other => {
                    return Err(e(format!(
                        "resource key '{other}' is not supported by the testbed"
                    )));
                }
            }
        }
        let rtype = d
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| e("missing 'type'".into()))?;
        if is_template_type(rtype) {
            if find_file(files, rtype).is_none() {
                return Err(e(format!(
                    "template resource type '{rtype}' not found in files"
                )));
            }
        } else if !super::SUPPORTED_TYPES.contains(&rtype) {
            return Err(e(format!(
                "resource type '{rtype}' is not supported by the testbed (supported: {}, and nested templates from files)",
                super::SUPPORTED_TYPES.join(", ")
            )));
        }
        let properties = d.get("properties").cloned().unwrap_or_else(|| json!({}));
        let mut refs = BTreeSet::new();
        references(&properties, &mut refs).map_err(e)?;
        if let Some(m) = d.get("metadata") {
            references(m, &mut refs).map_err(e)?;
        }
        match d.get("depends_on") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                refs.insert(s.clone());
            }
            Some(Value::Array(a)) => {
                for x in a {
                    refs.insert(
                        x.as_str()
                            .ok_or_else(|| e("depends_on entries must be names".into()))?
                            .to_string(),
                    );
                }
            }
            Some(_) => return Err(e("depends_on must be a name or a list of names".into())),
        }
        for r in &refs {
            if !res.contains_key(r) {
                return Err(e(format!("refers to unknown resource '{r}'")));
            }
            if r == name {
                return Err(e("refers to itself".into()));
            }
        }
        defs.push(ResDef {
            name: name.clone(),
            rtype: rtype.to_string(),
            properties,
            deps: refs.into_iter().collect(),
        });
    }
    // Kahn levels.
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut levels = Vec::new();
    while done.len() < defs.len() {
        let level: Vec<String> = defs
            .iter()
            .filter(|d| !done.contains(&d.name) && d.deps.iter().all(|x| done.contains(x)))
            .map(|d| d.name.clone())
            .collect();
        if level.is_empty() {
            let left: Vec<_> = defs
                .iter()
                .filter(|d| !done.contains(&d.name))
                .map(|d| d.name.as_str())
                .collect();
            return Err(format!("Circular Dependency Found: {}", left.join(", ")));
        }
        done.extend(level.iter().cloned());
        levels.push(level);
    }
    Ok((defs, levels))
}

/// Looks a template-resource type up in `files` (exact key, or same base name).
pub fn find_file<'a>(files: &'a BTreeMap<String, String>, name: &str) -> Option<&'a String> {
    files.get(name).or_else(|| {
        let base = name.rsplit('/').next().unwrap_or(name);
        files
            .iter()
            .find(|(k, _)| k.rsplit('/').next() == Some(base))
            .map(|(_, v)| v)
    })
}

/// Evaluation context: the records, the stack and the cloud.
pub struct Ctx<'a> {
    /// Records.
    pub inner: &'a Inner,
    /// The stack whose template is evaluated.
    pub stack: &'a Stack,
    /// The cloud (base URL, project).
    pub cloud: &'a Cloud,
}

fn walk_path(mut v: Value, path: &[Value]) -> Value {
    for p in path {
        v = match (&v, p) {
            (Value::Object(m), Value::String(k)) => m.get(k).cloned().unwrap_or(Value::Null),
            (Value::Array(a), Value::Number(n)) => n
                .as_u64()
                .and_then(|i| a.get(i as usize))
                .cloned()
                .unwrap_or(Value::Null),
            (Value::Array(a), Value::String(s)) => s
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get(i))
                .cloned()
                .unwrap_or(Value::Null),
            _ => Value::Null,
        };
    }
    v
}

/// Renders a value into a string the way Heat's `str_replace`/`list_join` do.
fn stringify(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Ctx<'_> {
    /// Resolves every function in `v`.
    pub fn resolve(&self, v: &Value) -> Result<Value, String> {
        if let Some((f, args)) = as_function(v) {
            return self.call(f, args);
        }
        Ok(match v {
            Value::Array(a) => Value::Array(
                a.iter()
                    .map(|x| self.resolve(x))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => {
                let mut o = Map::new();
                for (k, x) in m {
                    o.insert(k.clone(), self.resolve(x)?);
                }
                Value::Object(o)
            }
            other => other.clone(),
        })
    }

    fn call(&self, f: &str, args: &Value) -> Result<Value, String> {
        match f {
            "get_param" => {
                let args = self.resolve(args)?;
                let (name, path) = match &args {
                    Value::String(s) => (s.clone(), Vec::new()),
                    Value::Array(a) if !a.is_empty() => (
                        a[0].as_str()
                            .ok_or("get_param: first element must be a name")?
                            .to_string(),
                        a[1..].to_vec(),
                    ),
                    _ => return Err("get_param: expected a name or a list".into()),
                };
                let base = match name.as_str() {
                    "OS::stack_name" => Value::String(self.stack.name.clone()),
                    "OS::stack_id" => Value::String(self.stack.id.clone()),
                    "OS::project_id" => Value::String(self.cloud.project_id.clone()),
                    _ => self.stack.params.get(&name).cloned().ok_or_else(|| {
                        format!("The Parameter ({name}) was not defined in template.")
                    })?,
                };
                if path.is_empty() {
                    return Ok(base);
                }
                // Heat returns '' for a path that does not exist.
                let v = walk_path(base.clone(), &path);
                if v.is_null() && !path_exists(&base, &path) {
                    Ok(Value::String(String::new()))
                } else {
                    Ok(v)
                }
            }
            "get_resource" => {
                let n = args
                    .as_str()
                    .ok_or("get_resource: expected a resource name")?;
                Ok(Value::String(
                    self.stack
                        .res(n)
                        .map(|r| r.physical_id.clone())
                        .unwrap_or_default(),
                ))
            }
            "get_attr" => {
                let a = self.resolve(args)?;
                let a = a.as_array().ok_or("get_attr: expected a list")?;
                if a.len() < 2 {
                    return Err("get_attr: expected [resource, attribute, ...]".into());
                }
                let rn = a[0]
                    .as_str()
                    .ok_or("get_attr: resource name must be a string")?;
                let an = a[1]
                    .as_str()
                    .ok_or("get_attr: attribute name must be a string")?;
                // HOT 2013-05-23 reads the attribute without its path, then selects the path
                // from the value (Heat's `GetAttThenSelect`): a group's `outputs_list` and
                // `outputs` exist only with a member output's name, so they cannot be read.
                let version = self.stack.template["heat_template_version"]
                    .as_str()
                    .unwrap_or("");
                if version.starts_with("20")
                    && version < "2014-10-16"
                    && matches!(an, "outputs_list" | "outputs")
                    && self
                        .stack
                        .res(rn)
                        .is_some_and(|r| r.rtype == "OS::Heat::AutoScalingGroup")
                {
                    return Err(format!(
                        "The Referenced Attribute ({rn} {an}) is incorrect."
                    ));
                }
                let v = self.attribute(rn, an, a.get(2))?;
                let skip = if matches!(an, "outputs_list" | "outputs") {
                    3
                } else {
                    2
                };
                Ok(walk_path(v, a.get(skip..).unwrap_or(&[])))
            }
            "get_file" => {
                let n = args.as_str().ok_or("get_file: expected a file name")?;
                super::template::find_file(&self.stack.files, n)
                    .map(|s| Value::String(s.clone()))
                    .ok_or_else(|| format!("get_file: file '{n}' not found in files"))
            }
            "str_replace" => {
                let a = self.resolve(args)?;
                let tpl = a.get("template").ok_or("str_replace: missing 'template'")?;
                let mut s = stringify(tpl);
                let params = a
                    .get("params")
                    .and_then(Value::as_object)
                    .ok_or("str_replace: missing 'params'")?;
                let mut keys: Vec<_> = params.iter().collect();
                keys.sort_by_key(|k| std::cmp::Reverse(k.0.len()));
                for (k, v) in keys {
                    s = s.replace(k.as_str(), &stringify(v));
                }
                Ok(Value::String(s))
            }
            "list_join" => {
                let a = self.resolve(args)?;
                let a = a
                    .as_array()
                    .ok_or("list_join: expected [delimiter, list, ...]")?;
                let sep = a
                    .first()
                    .and_then(Value::as_str)
                    .ok_or("list_join: delimiter must be a string")?;
                let mut items = Vec::new();
                for l in &a[1..] {
                    match l {
                        Value::Array(x) => items.extend(x.iter().map(stringify)),
                        Value::Null => {}
                        other => return Err(format!("list_join: expected lists, got {other}")),
                    }
                }
                Ok(Value::String(items.join(sep)))
            }
            other => Err(format!(
                "intrinsic function '{other}' is not supported by the testbed (supported: {})",
                SUPPORTED_FUNCTIONS.join(", ")
            )),
        }
    }

    /// Evaluates `get_attr` on a resource of this stack.
    pub fn attribute(&self, rn: &str, an: &str, arg: Option<&Value>) -> Result<Value, String> {
        let r = self.stack.res(rn);
        let Some(r) = r else {
            return Ok(Value::Null); // not created yet (Heat yields None)
        };
        let inner = self.inner;
        let unsupported = || {
            Err(format!(
                "resources.{rn}: attribute '{an}' of {} is not supported by the testbed",
                r.rtype
            ))
        };
        match r.rtype.as_str() {
            "OS::Nova::Server" => {
                let Some(s) = inner.servers.get(&r.physical_id) else {
                    return Ok(Value::Null);
                };
                let mut nets: Map<String, Value> = Map::new();
                let mut addrs: Map<String, Value> = Map::new();
                for p in s.ports.iter().filter_map(|p| inner.ports.get(p)) {
                    let nn = inner
                        .networks
                        .get(&p.network_id)
                        .map(|n| n.name.clone())
                        .unwrap_or_default();
                    for key in [nn.clone(), p.network_id.clone()] {
                        if let Some(Value::Array(a)) = nets.get_mut(&key) {
                            a.push(json!(p.ip.to_string()));
                        } else {
                            nets.insert(key, json!([p.ip.to_string()]));
                        }
                    }
                    let e = json!({"addr": p.ip.to_string(), "version": 4, "OS-EXT-IPS:type": "fixed",
                                   "OS-EXT-IPS-MAC:mac_addr": p.mac, "port": p.id});
                    match addrs.get_mut(&nn) {
                        Some(Value::Array(a)) => a.push(e),
                        _ => {
                            addrs.insert(nn, json!([e]));
                        }
                    }
                }
                let first = s
                    .ports
                    .first()
                    .and_then(|p| inner.ports.get(p))
                    .map(|p| p.ip.to_string());
                Ok(match an {
                    "first_address" | "accessIPv4" => json!(first.unwrap_or_default()),
                    "networks" => Value::Object(nets),
                    "addresses" => Value::Object(addrs),
                    "name" | "instance_name" => json!(s.name),
                    // No server groups in the testbed: Nova's (2.71+) and Heat's answer is [].
                    "server_groups" => json!([]),
                    "show" => crate::cloud::nova::server_json(
                        self.cloud,
                        inner,
                        s,
                        crate::cloud::nova::MAX_MICROVERSION,
                    ),
                    _ => return unsupported(),
                })
            }
            "OS::Neutron::Port" => {
                let Some(p) = inner.ports.get(&r.physical_id) else {
                    return Ok(Value::Null);
                };
                Ok(match an {
                    "fixed_ips" => {
                        json!([{"ip_address": p.ip.to_string(), "subnet_id": p.subnet_id}])
                    }
                    "mac_address" => json!(p.mac),
                    "network_id" => json!(p.network_id),
                    "name" => json!(p.name),
                    "device_id" => json!(p.device_id),
                    "subnets" => json!([{"id": p.subnet_id, "cidr": self.cloud.cidr()}]),
                    "show" => crate::cloud::neutron::port_json(self.cloud, inner, p),
                    _ => return unsupported(),
                })
            }
            "OS::Cinder::Volume" => {
                let Some(v) = inner.volumes.get(&r.physical_id) else {
                    return Ok(Value::Null);
                };
                Ok(match an {
                    "size" => json!(v.size),
                    "status" => json!(v.status),
                    "display_name" | "name" => json!(v.name),
                    "attachments_list" => {
                        crate::cloud::cinder::volume_json(self.cloud, v, true)["attachments"]
                            .clone()
                    }
                    // Heat's deprecated string form of the list (JSON here, not Python's repr).
                    "attachments" => json!(
                        crate::cloud::cinder::volume_json(self.cloud, v, true)["attachments"]
                            .to_string()
                    ),
                    "show" => crate::cloud::cinder::volume_json(self.cloud, v, true),
                    _ => return unsupported(),
                })
            }
            "OS::Heat::AutoScalingGroup" => {
                let Some(child) = r.nested.as_ref().and_then(|n| inner.stacks.get(n)) else {
                    return Ok(Value::Null);
                };
                let members: Vec<&super::Res> = {
                    let mut m: Vec<_> = child.resources.iter().collect();
                    m.sort_by_key(|x| (x.seq, x.name.clone()));
                    m
                };
                let out_of = |m: &super::Res, key: &str| -> Result<Value, String> {
                    match m.nested.as_ref().and_then(|n| inner.stacks.get(n)) {
                        Some(ms) => Ctx {
                            inner,
                            stack: ms,
                            cloud: self.cloud,
                        }
                        .output(key),
                        None => Ok(Value::Null),
                    }
                };
                match an {
                    "refs" => Ok(Value::Array(
                        members.iter().map(|m| json!(m.physical_id)).collect(),
                    )),
                    "refs_map" => Ok(Value::Object(
                        members
                            .iter()
                            .map(|m| (m.name.clone(), json!(m.physical_id)))
                            .collect(),
                    )),
                    "current_size" => Ok(json!(members.len())),
                    "outputs_list" | "outputs" if arg.is_none() => {
                        // Without an output name (resource show): every output of each member.
                        let all = |m: &super::Res| -> Value {
                            let Some(ms) = m.nested.as_ref().and_then(|n| inner.stacks.get(n))
                            else {
                                return Value::Null;
                            };
                            let ctx = Ctx {
                                inner,
                                stack: ms,
                                cloud: self.cloud,
                            };
                            Value::Object(
                                output_keys(ms)
                                    .into_iter()
                                    .map(|k| {
                                        let v = ctx.output(&k).unwrap_or(Value::Null);
                                        (k, v)
                                    })
                                    .collect(),
                            )
                        };
                        Ok(if an == "outputs_list" {
                            Value::Array(members.iter().map(|m| all(m)).collect())
                        } else {
                            Value::Object(
                                members.iter().map(|m| (m.name.clone(), all(m))).collect(),
                            )
                        })
                    }
                    "outputs_list" | "outputs" => {
                        let key = arg
                            .and_then(Value::as_str)
                            .ok_or_else(|| format!("get_attr {an} needs an output name"))?;
                        if an == "outputs_list" {
                            Ok(Value::Array(
                                members
                                    .iter()
                                    .map(|m| out_of(m, key))
                                    .collect::<Result<_, _>>()?,
                            ))
                        } else {
                            let mut o = Map::new();
                            for m in &members {
                                o.insert(m.name.clone(), out_of(m, key)?);
                            }
                            Ok(Value::Object(o))
                        }
                    }
                    _ => unsupported(),
                }
            }
            "OS::Heat::ScalingPolicy" => Ok(match an {
                "alarm_url" | "signal_url" => json!(format!(
                    "{}/heat-api/v1/{}/stacks/{}/{}/resources/{}/signal",
                    self.cloud.base, self.cloud.project_id, self.stack.name, self.stack.id, rn
                )),
                _ => return unsupported(),
            }),
            "OS::Neutron::FloatingIP" => {
                let Some(f) = inner.floating_ips.get(&r.physical_id) else {
                    return Ok(Value::Null);
                };
                Ok(match an {
                    "floating_ip_address" => json!(f.address.to_string()),
                    "fixed_ip_address" => json!(f.fixed.map(|a| a.to_string())),
                    "floating_network_id" => json!(f.network_id),
                    "port_id" => json!(f.port_id),
                    "router_id" => json!(crate::cloud::neutron::ROUTER_ID),
                    "show" => crate::cloud::neutron::floating_ip_json(self.cloud, f),
                    _ => return unsupported(),
                })
            }
            t if is_template_type(t) => {
                let Some(child) = r.nested.as_ref().and_then(|n| inner.stacks.get(n)) else {
                    return Ok(Value::Null);
                };
                if an == "OS::stack_id" {
                    return Ok(json!(child.id));
                }
                Ctx {
                    inner,
                    stack: child,
                    cloud: self.cloud,
                }
                .output(an)
            }
            _ => unsupported(),
        }
    }

    /// The attributes `GET …/resources/{name}` shows for resource `rn`, as Heat's
    /// `format_resource_attributes` builds them: for a resource with a `show` attribute (servers,
    /// ports, volumes) the service's show body, plus each of `with_attr` not in it; otherwise every
    /// attribute of the type's schema that the testbed knows (unresolvable ones are `null`).
    pub fn shown_attributes(&self, rn: &str, with_attr: &[String]) -> Value {
        let Some(r) = self.stack.res(rn) else {
            return json!({});
        };
        let get = |a: &str| self.attribute(rn, a, None).unwrap_or(Value::Null);
        if matches!(
            r.rtype.as_str(),
            "OS::Nova::Server" | "OS::Neutron::Port" | "OS::Cinder::Volume"
        ) && let Value::Object(mut show) = get("show")
        {
            for a in with_attr {
                if !show.contains_key(a) {
                    show.insert(a.clone(), get(a));
                }
            }
            return Value::Object(show);
        }
        let mut names: Vec<String> = match r.rtype.as_str() {
            "OS::Heat::AutoScalingGroup" => [
                "current_size",
                "outputs",
                "outputs_list",
                "refs",
                "refs_map",
            ]
            .map(String::from)
            .to_vec(),
            "OS::Heat::ScalingPolicy" => ["alarm_url", "signal_url"].map(String::from).to_vec(),
            "OS::Neutron::FloatingIP" => [
                "fixed_ip_address",
                "floating_ip_address",
                "floating_network_id",
                "port_id",
                "router_id",
            ]
            .map(String::from)
            .to_vec(),
            t if is_template_type(t) => {
                let mut k = r
                    .nested
                    .as_ref()
                    .and_then(|n| self.inner.stacks.get(n))
                    .map(output_keys)
                    .unwrap_or_default();
                k.push("OS::stack_id".into());
                k
            }
            _ => Vec::new(),
        };
        names.extend(with_attr.iter().cloned());
        Value::Object(
            names
                .into_iter()
                .map(|a| {
                    let v = get(&a);
                    (a, v)
                })
                .collect(),
        )
    }

    /// Evaluates one output of this stack (`Null` when absent).
    pub fn output(&self, key: &str) -> Result<Value, String> {
        match self.stack.template.get("outputs").and_then(|o| o.get(key)) {
            Some(o) => self.resolve(o.get("value").unwrap_or(&Value::Null)),
            None => Ok(Value::Null),
        }
    }
}

fn path_exists(base: &Value, path: &[Value]) -> bool {
    let mut v = base;
    for p in path {
        v = match (v, p) {
            (Value::Object(m), Value::String(k)) => match m.get(k) {
                Some(x) => x,
                None => return false,
            },
            (Value::Array(a), Value::Number(n)) => match n.as_u64().and_then(|i| a.get(i as usize))
            {
                Some(x) => x,
                None => return false,
            },
            _ => return false,
        };
    }
    true
}

/// Output names of a stack's template, in template order.
fn output_keys(s: &super::Stack) -> Vec<String> {
    s.template
        .get("outputs")
        .and_then(Value::as_object)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_join_of_several_lists_needs_hot_2015_10_15() {
        let t = |v: &str| {
            json!({"heat_template_version": v, "outputs": {
                "joined": {"value": {"list_join": [",", ["a"], ["b"]]}}}})
        };
        let e = parse_template(&t("2013-05-23")).unwrap_err();
        assert!(
            e.starts_with("outputs.joined.value.list_join: : Incorrect arguments"),
            "{e}"
        );
        assert!(parse_template(&t("2015-10-15")).is_ok());
        assert!(parse_template(&t("wallaby")).is_ok());
        let one = json!({"heat_template_version": "2013-05-23", "outputs": {
            "joined": {"value": {"list_join": [",", ["a", "b"]]}}}});
        assert!(parse_template(&one).is_ok());
    }

    #[test]
    fn parameters_are_typed_and_defaulted() {
        let t = json!({"heat_template_version": "2013-05-23", "parameters": {
            "nfv": {"type": "json"}, "n": {"type": "number", "default": "3"},
            "l": {"type": "comma_delimited_list", "default": "a, b"}, "b": {"type": "boolean", "default": "yes"},
            "s": {"type": "string"}}});
        let given: Map<String, Value> =
            serde_json::from_value(json!({"nfv": "{\"VDU\": {}}", "s": 5})).unwrap();
        let p = effective_params(&t, &given).unwrap();
        assert_eq!(p["nfv"], json!({"VDU": {}}));
        assert_eq!(p["n"], json!(3.0));
        assert_eq!(p["l"], json!(["a", "b"]));
        assert_eq!(p["b"], json!(true));
        assert_eq!(p["s"], json!("5"));
        let err = effective_params(&t, &Map::new()).unwrap_err();
        assert!(
            err.contains("The Parameter (nfv) was not provided."),
            "{err}"
        );
        assert_eq!(param_string(&json!({"a": 1})), json!("{\"a\":1}"));
        assert_eq!(param_string(&json!(["x", "y"])), json!("x,y"));
    }

    #[test]
    fn references_find_dependencies_and_reject_unknown_functions() {
        let mut r = BTreeSet::new();
        references(
            &json!({"a": {"get_resource": "p"}, "b": [{"get_attr": ["q", "x"]}]}),
            &mut r,
        )
        .unwrap();
        assert_eq!(r.into_iter().collect::<Vec<_>>(), vec!["p", "q"]);
        let e =
            references(&json!({"yaql": {"expression": "1"}}), &mut BTreeSet::new()).unwrap_err();
        assert!(e.contains("'yaql'"), "{e}");
        // A one-key mapping that is not a function is data.
        references(&json!({"ip_address": "10.0.0.1"}), &mut BTreeSet::new()).unwrap();
    }

    #[test]
    fn levels_follow_dependencies_and_cycles_fail() {
        let t = json!({"heat_template_version": "x", "resources": {
            "s": {"type": "OS::Nova::Server", "properties": {"networks": [{"port": {"get_resource": "p"}}]}},
            "p": {"type": "OS::Neutron::Port"}, "v": {"type": "OS::Cinder::Volume", "depends_on": "s"}}});
        let (_, levels) = resource_defs(&t, &BTreeMap::new()).unwrap();
        assert_eq!(
            levels,
            vec![
                vec!["p".to_string()],
                vec!["s".to_string()],
                vec!["v".to_string()]
            ]
        );
        let t = json!({"heat_template_version": "x", "resources": {
            "a": {"type": "OS::Heat::None", "depends_on": "b"}, "b": {"type": "OS::Heat::None", "depends_on": "a"}}});
        assert!(
            resource_defs(&t, &BTreeMap::new())
                .unwrap_err()
                .contains("Circular")
        );
        let t = json!({"heat_template_version": "x", "resources": {"a": {"type": "nested.yaml"}}});
        assert!(
            resource_defs(&t, &BTreeMap::new())
                .unwrap_err()
                .contains("not found in files")
        );
    }

    #[test]
    fn functions_evaluate_like_heat() {
        let cloud = crate::cloud::Cloud::new(
            &crate::cloud::CloudOptions::no_hosts("/nonexistent"),
            "http://x".into(),
        )
        .unwrap();
        let inner = Inner::default();
        let mut params = Map::new();
        params.insert(
            "nfv".into(),
            json!({"VDU": {"VDU1": {"flavor": "m1.tiny", "zone": null}}, "list": ["a", "b"]}),
        );
        let stack = Stack {
            id: "sid".into(),
            name: "st".into(),
            parent: None,
            top: "sid".into(),
            template: json!({}),
            files: BTreeMap::from([("f.sh".to_string(), "echo hi".to_string())]),
            params_given: Map::new(),
            params,
            action: "CREATE".into(),
            status: "IN_PROGRESS".into(),
            reason: String::new(),
            resources: Vec::new(),
            events: Vec::new(),
            created: chrono::Utc::now(),
            updated: None,
            deleted: None,
            disable_rollback: true,
            timeout_mins: None,
            tags: None,
            replaced: Vec::new(),
        };
        let ctx = Ctx {
            inner: &inner,
            stack: &stack,
            cloud: &cloud,
        };
        let r = |v: Value| ctx.resolve(&v).unwrap();
        assert_eq!(
            r(json!({"get_param": ["nfv", "VDU", "VDU1", "flavor"]})),
            json!("m1.tiny")
        );
        assert_eq!(
            r(json!({"get_param": ["nfv", "VDU", "VDU9", "flavor"]})),
            json!(""),
            "missing path → ''"
        );
        assert_eq!(
            r(json!({"get_param": ["nfv", "VDU", "VDU1", "zone"]})),
            Value::Null
        );
        assert_eq!(r(json!({"get_param": ["nfv", "list", 1]})), json!("b"));
        assert_eq!(r(json!({"get_param": "OS::stack_name"})), json!("st"));
        assert_eq!(
            r(json!({"str_replace": {"template": "$a-$ab", "params": {"$a": "1", "$ab": 2}}})),
            json!("1-2"),
            "longest key first"
        );
        assert_eq!(
            r(json!({"list_join": ["-", ["a", "b"], ["c"]]})),
            json!("a-b-c")
        );
        assert_eq!(r(json!({"get_file": "f.sh"})), json!("echo hi"));
        assert_eq!(r(json!({"get_resource": "nope"})), json!(""));
        assert!(
            ctx.resolve(&json!({"repeat": {}}))
                .unwrap_err()
                .contains("'repeat'")
        );
    }
}
