//! Intake of one request file: the bytes go to [`wire::parse_envelope`], the function intake's
//! `admission::examine` calls on a file's content (after its size check, which is the same
//! [`wire::MAX_REQUEST_BYTES`]).
//!
//! Properties:
//! - a rejection names at least one defect, and as the ProblemDetails intake writes (status 400,
//!   `errors`) it serialises to JSON and back unchanged;
//! - when the file parses as JSON, every pointer of a rejection or a warning names a place in it
//!   ([`crate::pointer_in`]);
//! - an accepted file is JSON, parsing it again gives the same envelope, and its re-serialised
//!   JSON is accepted too;
//! - for an accepted LCM request, the body as the store keeps it ([`redact::redact`] at the
//!   secret pointers validation found, what `RequestBody::redacted` does before the write) holds
//!   `"***"` at every secret pointer, and [`redact::restore`] (what the store's read does after
//!   opening the sealed secrets) gives back the body exactly; the `intake_store` target does
//!   the same through a real SQLite store.
//! - a file that parses as JSON is redacted by name without a panic (intake's kept copy of a
//!   rejected file).

use serde_json::Value;
use vnfkeeper_core::model::ProblemDetails;
use vnfkeeper_core::wire::{self, Envelope, redact};

use crate::pointer_in;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let doc: Option<Value> =
        serde_json::from_slice(data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data)).ok();
    match wire::parse_envelope(data) {
        Err(errors) => {
            assert!(!errors.is_empty(), "a rejection without any defect");
            let problem = ProblemDetails::new(400, "invalid request", errors);
            let text = serde_json::to_string(&problem).expect("ProblemDetails serialises");
            let back: ProblemDetails = serde_json::from_str(&text).expect("ProblemDetails parses");
            assert_eq!(back, problem, "ProblemDetails does not round-trip");
            if let Some(doc) = &doc {
                for e in &problem.errors {
                    assert!(
                        pointer_in(doc, &e.pointer),
                        "rejection pointer {:?} ({}) is not in the input",
                        e.pointer,
                        e.reason
                    );
                }
                let _ = redact::redact_by_name(doc);
            }
        }
        Ok(parsed) => {
            let doc = doc.expect("an accepted file parses as JSON");
            for w in &parsed.warnings {
                assert!(
                    pointer_in(&doc, &w.pointer),
                    "warning pointer {:?} is not in the input",
                    w.pointer
                );
            }
            let again =
                wire::parse_envelope(data).expect("accepted once, rejected the second time");
            assert_eq!(
                format!("{:?}", again.envelope),
                format!("{:?}", parsed.envelope)
            );
            let reser = serde_json::to_vec(&doc).expect("serialises");
            if let Err(e) = wire::parse_envelope(&reser) {
                panic!("accepted, but its re-serialised JSON is rejected: {e:?}");
            }
            if let Envelope::Lcm(env) = &parsed.envelope {
                assert_eq!(
                    parsed.secret_pointers,
                    env.secret_pointers(),
                    "the walk's secret pointers differ"
                );
                for p in &parsed.secret_pointers {
                    assert!(
                        doc.pointer(p).is_some(),
                        "secret pointer {p:?} is not in the input"
                    );
                }
                let in_body: Vec<String> = parsed
                    .secret_pointers
                    .iter()
                    .filter_map(|p| p.strip_prefix("/request").map(str::to_owned))
                    .collect();
                let (mut stored, secrets) = redact::redact(&env.request, &in_body);
                for p in secrets.pointers() {
                    assert_eq!(
                        stored.pointer(p).and_then(Value::as_str),
                        Some(redact::REDACTED),
                        "secret at {p:?} not redacted"
                    );
                }
                redact::restore(&mut stored, &secrets)
                    .expect("the secrets go back where they were");
                assert_eq!(stored, env.request, "redact then restore changed the body");
                let _ = env
                    .typed_request()
                    .expect("typed_request of a parsed envelope");
                let _ = env.package_paths();
            }
        }
    }
}
