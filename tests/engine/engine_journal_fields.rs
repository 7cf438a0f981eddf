//! Two operations at once never mix their journal fields (needs root): two INSTANTIATEs run
//! concurrently on one engine, and every log record is checked with the fields a journald record
//! gets from its enclosing spans (as `tracing-journald` collects them: the event's span scope):
//! one `vnf_instance_id` per record, the operation's own `vnf_lcm_op_occ_id`, and a `vnfc_id` of
//! that VNF.

use crate::support;
use vnfkeeper_core::model::{OpOccId, OperationState, VnfInstanceId};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use support::bed::{Bed, fast_limits};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;
use vnfkeeper::intake::spool::Outcome;

/// Field name → values, collected over an event's span scope and the event itself.
type Fields = BTreeMap<String, Vec<String>>;

#[derive(Default)]
struct SpanFields(Vec<(String, String)>);

struct Collect<'a>(&'a mut Vec<(String, String)>);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        ));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

/// Records every event with the fields of its span scope.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<(String, Fields)>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut f = SpanFields::default();
        attrs.record(&mut Collect(&mut f.0));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(f);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(f) = span.extensions_mut().get_mut::<SpanFields>()
        {
            values.record(&mut Collect(&mut f.0));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<SpanFields>() {
                    for (k, v) in &f.0 {
                        fields.entry(k.clone()).or_default().push(v.clone());
                    }
                }
            }
        }
        let mut own = Vec::new();
        event.record(&mut Collect(&mut own));
        let message = own
            .iter()
            .find(|(k, _)| k == "message")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        for (k, v) in own {
            fields.entry(k).or_default().push(v);
        }
        self.0.lock().unwrap().push((message, fields));
    }
}

fn instantiate(bed: &Bed, vnf: &str) -> OpOccId {
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["vnfInstanceId"] = vnf.into();
    env["requestId"] = vnf.into();
    match bed.submit(&serde_json::to_vec(&env).unwrap()) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn two_concurrent_operations_never_mix_their_journal_fields() {
    let capture = Capture::default();
    tracing_subscriber::registry()
        .with(capture.clone())
        .with(tracing_subscriber::filter::LevelFilter::INFO)
        .init();
    let bed = Bed::new("vkj", 71, fast_limits()).await;
    let a = instantiate(&bed, "fields-a");
    let b = instantiate(&bed, "fields-b");
    let (ra, rb) = tokio::join!(bed.engine.run(&a), bed.engine.run(&b));
    assert_eq!(
        ra.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&a)
    );
    assert_eq!(
        rb.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&b)
    );

    let vnfcs_of = |vnf: &str| -> Vec<String> {
        bed.db
            .with(|s| s.reader().vnfcs(&VnfInstanceId::from(vnf)))
            .unwrap()
            .into_iter()
            .map(|v| v.id.into_string())
            .collect()
    };
    let owner: BTreeMap<&str, (&str, Vec<String>)> = [
        ("fields-a", (a.as_str(), vnfcs_of("fields-a"))),
        ("fields-b", (b.as_str(), vnfcs_of("fields-b"))),
    ]
    .into_iter()
    .collect();
    let records = capture.0.lock().unwrap().clone();
    let mut checked = BTreeMap::<&str, usize>::new();
    for (message, fields) in &records {
        let Some(vnfs) = fields.get("vnf_instance_id") else {
            continue;
        };
        assert_eq!(vnfs.len(), 1, "{message}: {fields:?}");
        let vnf = vnfs[0].as_str();
        let (op, vnfcs) = &owner[vnf];
        assert_eq!(
            fields.get("vnf_lcm_op_occ_id"),
            Some(&vec![op.to_string()]),
            "{message}: {fields:?}"
        );
        for vnfc in fields.get("vnfc_id").into_iter().flatten() {
            assert!(
                vnfcs.contains(vnfc),
                "{message}: VNFC {vnfc} is not of {vnf}"
            );
        }
        *checked.entry(vnf).or_default() += 1;
    }
    eprintln!("records checked per VNF: {checked:?}");
    // Both operations logged step records inside their spans (the check above is not vacuous).
    let steps = |vnf: &str| {
        records
            .iter()
            .filter(|(m, f)| {
                m == "step done" && f.get("vnf_instance_id") == Some(&vec![vnf.to_owned()])
            })
            .count()
    };
    assert!(steps("fields-a") >= 5, "{checked:?}");
    assert!(steps("fields-b") >= 5, "{checked:?}");
}
