//! clouds.yaml: its text goes to [`vnfkeeper::cloud::parse_clouds_yaml`], the parser
//! `OpenStackCloud::connect` and `vnfkeeper config check` run on the file, for the entry
//! `openstack` and for the first entry the file names.
//!
//! Properties: no panic; an error and the accepted entry's `Debug` text never show a credential
//! (an `auth.password`, `auth.token` or `auth.application_credential_secret` of at least 8
//! characters that appears nowhere else in the
//! file, neither as a key nor as another value); parsing is deterministic.

use serde_json::Value;
use vnfkeeper::cloud::parse_clouds_yaml;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return; // the daemon reads the file with `read_to_string`: not UTF-8 is an I/O error.
    };
    let doc: Option<Value> = serde_yaml_ng::from_str(text).ok();
    let mut clouds = vec!["openstack".to_owned()];
    if let Some(first) = doc
        .as_ref()
        .and_then(|d| d["clouds"].as_object())
        .and_then(|c| c.keys().next())
    {
        clouds.push(first.clone());
    }
    let secrets = doc.as_ref().map(secrets).unwrap_or_default();
    for cloud in &clouds {
        let shown = parse_clouds_yaml(text, cloud);
        assert_eq!(shown, parse_clouds_yaml(text, cloud), "not deterministic");
        let shown = match shown {
            Ok(s) => s,
            Err(e) => e.to_string(),
        };
        for s in &secrets {
            assert!(
                !shown.contains(s.as_str()),
                "a credential is shown: {shown}"
            );
        }
    }
}

/// The credentials of `doc` worth checking: `password`/`token`/`application_credential_secret`
/// string values of 8 characters or
/// more that occur in no key and in no other string value of the document (so that a message
/// naming a key or a cloud cannot show them by coincidence).
fn secrets(doc: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut others = Vec::new();
    walk(doc, None, &mut found, &mut others);
    found.retain(|s: &String| {
        s.chars().count() >= 8
            && !others.iter().any(|o: &String| o.contains(s.as_str()))
            && !FIXED.contains(s.as_str())
    });
    found
}

/// Words the parser's messages and the entry's `Debug` text print themselves.
const FIXED: &str = "CloudEntry auth_url credentials project project_domain region_name \
    interface cacert verify password user domain <redacted> v3token token Some None Name Id \
    true false Default clouds mapping required must be a string boolean not supported use \
    `password` or `v3token` user_id username no cloud named not valid YAML \
    v3applicationcredential `v3applicationcredential` ApplicationCredential secret=<redacted> \
    application_credential_id application_credential_name application_credential_secret \
    name is required with NameOfUser user_domain user_domain_name user_domain_id";

fn walk(v: &Value, key: Option<&str>, found: &mut Vec<String>, others: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                others.push(k.clone());
                walk(v, Some(k), found, others);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| walk(v, None, found, others)),
        Value::String(s)
            if matches!(
                key,
                Some("password" | "token" | "application_credential_secret")
            ) =>
        {
            found.push(s.clone())
        }
        Value::String(s) => others.push(s.clone()),
        Value::Number(n) => others.push(n.to_string()),
        _ => {}
    }
}
