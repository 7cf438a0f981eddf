//! Table tests of the remediation policy ([`decide`]) and one test per rule of `rules`.

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp(
        chrono::DateTime::parse_from_rfc3339("2026-11-21T06:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc)
            + chrono::Duration::seconds(secs),
    )
}

fn policy() -> Policy {
    Policy {
        grace: Duration::from_secs(60),
        startup_grace: Duration::from_secs(600),
        max_unhealthy: MaxUnhealthy::Percent(40),
        retry_budget: 2,
        retry_backoff: Duration::from_secs(100),
        min_healthy: Duration::from_secs(1000),
    }
}

/// A VNFC whose server was recorded long ago and is already known to the memory.
fn vnfc(id: &str, role: Role, cloud: CloudView) -> VnfcInput {
    VnfcInput {
        vnfc_id: id.into(),
        vdu_id: format!("{role:?}"),
        role,
        server_id: Some(format!("srv-{id}")),
        recorded_at: t(-100_000),
        cloud,
        probes: None,
        memory: Memory {
            server_id: Some(format!("srv-{id}")),
            server_since: Some(t(-100_000)),
            ..Memory::default()
        },
        rebuild_refused: None,
    }
}

fn vnf(vnfcs: Vec<VnfcInput>) -> VnfInput {
    VnfInput {
        vnf_instance_id: "vnf-1".into(),
        unfinished_operations: Vec::new(),
        vnfcs,
        pvs: PvView::NotApplicable,
        memory: Memory::default(),
        pass: "cloud",
        pause: None,
    }
}

/// A cluster: storage server, first master, 3 workers (5 VNFCs: 40 % allows 2 unhealthy).
fn cluster(w1: CloudView) -> VnfInput {
    vnf(vec![
        vnfc("ss", Role::StorageServer, CloudView::Healthy),
        vnfc("m0", Role::Master, CloudView::Healthy),
        vnfc("w1", Role::Worker, w1),
        vnfc("w2", Role::Worker, CloudView::Healthy),
        vnfc("w3", Role::Worker, CloudView::Healthy),
    ])
}

fn kinds(o: &VnfOutcome) -> Vec<(Option<&str>, DecisionKind)> {
    o.decisions
        .iter()
        .map(|d| (d.vnfc_id.as_ref().map(VnfcId::as_str), d.kind))
        .collect()
}

fn mem<'a>(o: &'a VnfOutcome, id: &str) -> &'a Memory {
    &o.memory.iter().find(|(v, _)| v == id).unwrap().1
}

/// Feeds the outcome's memory back into the input (the next pass).
fn carry(mut input: VnfInput, o: &VnfOutcome) -> VnfInput {
    for v in &mut input.vnfcs {
        if let Some((_, m)) = o.memory.iter().find(|(id, _)| *id == v.vnfc_id) {
            v.memory = m.clone();
        }
    }
    input.memory = o.vnf_memory.clone();
    input
}

fn confirmed() -> CloudView {
    CloudView::Confirmed("Nova status ERROR".into())
}

#[test]
fn one_cloud_view_per_row_gives_the_expected_decision() {
    use DecisionKind::*;
    let cases: Vec<(&str, CloudView, Vec<DecisionKind>, Option<bool>)> = vec![
        ("healthy: nothing", CloudView::Healthy, vec![], None),
        (
            "ERROR acts at once (replacement)",
            confirmed(),
            vec![HealStarted],
            Some(false),
        ),
        (
            "vanished acts at once",
            CloudView::Confirmed("server missing from the Nova listing".into()),
            vec![HealStarted],
            Some(false),
        ),
        (
            "API error: unknown, never unhealthy",
            CloudView::Unknown("compute 503".into()),
            vec![DeferredUnknown],
            None,
        ),
        (
            "BUILD: wait",
            CloudView::Transitional("Nova status BUILD".into()),
            vec![DeferredGrace],
            None,
        ),
        (
            "SHUTOFF once: needs confirmation",
            CloudView::Suspect("Nova status SHUTOFF".into()),
            vec![DeferredGrace],
            None,
        ),
    ];
    for (name, view, want, heal) in cases {
        let o = decide(&policy(), &cluster(view), t(0));
        let got: Vec<DecisionKind> = o.decisions.iter().map(|d| d.kind).collect();
        assert_eq!(got, want, "{name}: {:#?}", o.decisions);
        assert_eq!(
            o.heal.as_ref().map(|h| h.configuration_only),
            heal,
            "{name}"
        );
        if let Some(h) = &o.heal {
            assert_eq!(h.vnfc_ids, vec!["w1".to_string()], "{name}");
        }
    }
}

#[test]
fn a_failed_observation_acts_only_after_two_spanning_the_grace() {
    let suspect = CloudView::Suspect("Nova status SHUTOFF".into());
    let p = policy();
    let o1 = decide(&p, &cluster(suspect.clone()), t(0));
    assert!(o1.heal.is_none());
    assert_eq!(mem(&o1, "w1").cloud_failures, 1);
    // Second failure, but only 30 s later (grace 60 s): still waiting.
    let o2 = decide(&p, &carry(cluster(suspect.clone()), &o1), t(30));
    assert!(o2.heal.is_none(), "{:#?}", o2.decisions);
    assert_eq!(mem(&o2, "w1").cloud_failures, 2);
    // Third, 61 s after the first: confirmed → replacement.
    let o3 = decide(&p, &carry(cluster(suspect.clone()), &o2), t(61));
    assert_eq!(o3.heal.as_ref().unwrap().vnfc_ids, vec!["w1".to_string()]);
    // A healthy observation in between resets the count.
    let healthy = decide(&p, &carry(cluster(CloudView::Healthy), &o2), t(40));
    assert_eq!(mem(&healthy, "w1").cloud_failures, 0);
    let again = decide(&p, &carry(cluster(suspect.clone()), &healthy), t(120));
    assert!(again.heal.is_none());
    // Unknown neither counts nor resets.
    let unknown = decide(
        &p,
        &carry(cluster(CloudView::Unknown("503".into())), &o1),
        t(20),
    );
    assert_eq!(mem(&unknown, "w1").cloud_failures, 1);
    // A single observation long after never suffices: two are needed.
    let one = decide(&p, &cluster(suspect), t(10_000));
    assert!(one.heal.is_none());
}

#[test]
fn max_unhealthy_short_circuits_every_heal() {
    // 3 of 5 confirmed (40 % of 5 = 2 allowed): nothing healed, one VNF-level alert.
    let mut input = cluster(confirmed());
    input.vnfcs[3].cloud = confirmed();
    input.vnfcs[4].cloud = confirmed();
    let o = decide(&policy(), &input, t(0));
    assert!(o.heal.is_none());
    assert_eq!(o.decisions[0].kind, DecisionKind::ShortCircuit);
    assert!(o.decisions[0].kind.is_alert());
    assert_eq!(o.decisions[0].vnfc_id, None);
    assert_eq!(
        o.decisions[0].evidence["unhealthy"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(
        !o.decisions
            .iter()
            .any(|d| d.kind == DecisionKind::HealStarted)
    );
    // Unconfirmed failures count too (storm control is about what looks unhealthy now).
    let mut input = cluster(confirmed());
    input.vnfcs[3].cloud = CloudView::Suspect("SHUTOFF".into());
    input.vnfcs[4].cloud = CloudView::Suspect("SHUTOFF".into());
    assert!(decide(&policy(), &input, t(0)).heal.is_none());
    // Exactly at the limit: heals.
    let mut input = cluster(confirmed());
    input.vnfcs[3].cloud = confirmed();
    let o = decide(&policy(), &input, t(0));
    assert_eq!(o.heal.unwrap().vnfc_ids.len(), 2);
    // Unknown VNFCs never count.
    let mut input = cluster(confirmed());
    for v in &mut input.vnfcs[2..] {
        v.cloud = CloudView::Unknown("503".into());
    }
    input.vnfcs[0].cloud = confirmed();
    let o = decide(&policy(), &input, t(0));
    assert!(
        o.decisions
            .iter()
            .all(|d| d.kind != DecisionKind::ShortCircuit)
    );
}

#[test]
fn max_unhealthy_counts_and_percentages_round_down() {
    let cases = [
        ("40%", 5, 2),
        ("40%", 4, 1),
        ("40%", 1, 0),
        ("100%", 7, 7),
        ("0%", 7, 0),
        ("2", 100, 2),
        ("33%", 3, 0),
    ];
    for (text, total, allowed) in cases {
        assert_eq!(
            MaxUnhealthy::parse(text).unwrap().allowed(total),
            allowed,
            "{text} of {total}"
        );
    }
    assert!(MaxUnhealthy::parse("101%").is_err());
    assert!(MaxUnhealthy::parse("many").is_err());
    assert_eq!(MaxUnhealthy::parse(" 40% ").unwrap().to_string(), "40%");
}

#[test]
fn unfinished_operation_skips_the_vnf_without_touching_memory() {
    let mut input = cluster(confirmed());
    input.unfinished_operations = vec!["op-7".into()];
    let o = decide(&policy(), &input, t(0));
    assert!(o.heal.is_none());
    assert!(o.memory.is_empty());
    assert_eq!(kinds(&o), vec![(None, DecisionKind::InFlight)]);
    assert!(o.decisions[0].reason.contains("op-7"));
    // All healthy while an operation runs: nothing to say.
    let mut input = cluster(CloudView::Healthy);
    input.unfinished_operations = vec!["op-7".into()];
    assert!(decide(&policy(), &input, t(0)).decisions.is_empty());
}

#[test]
fn retry_budget_with_exponential_backoff_then_alert_then_reset() {
    let p = policy(); // budget 2, backoff 100 s: attempt 2 after 200 s
    let o1 = decide(&p, &cluster(confirmed()), t(0));
    assert!(o1.heal.is_some());
    assert_eq!(mem(&o1, "w1").heal_attempts, 1);
    // The heal replaced nothing useful: ERROR again at once (same server id) → backoff.
    let o2 = decide(&p, &carry(cluster(confirmed()), &o1), t(150));
    assert!(o2.heal.is_none());
    assert!(
        o2.decisions
            .iter()
            .any(|d| d.kind == DecisionKind::DeferredBackoff)
    );
    let o3 = decide(&p, &carry(cluster(confirmed()), &o2), t(201));
    assert!(o3.heal.is_some(), "{:#?}", o3.decisions);
    assert_eq!(mem(&o3, "w1").heal_attempts, 2);
    // Budget used up: alert, no heal, however long we wait.
    let o4 = decide(&p, &carry(cluster(confirmed()), &o3), t(100_000));
    assert!(o4.heal.is_none());
    let alert = o4
        .decisions
        .iter()
        .find(|d| d.kind == DecisionKind::BudgetExhausted)
        .unwrap();
    assert!(alert.kind.is_alert());
    // The same alert in the next pass is a repeat (one audit row for a lasting condition).
    let o5 = decide(&p, &carry(cluster(confirmed()), &o4), t(100_015));
    assert!(o5.decisions.iter().all(|d| d.repeat), "{:#?}", o5.decisions);
    // Healthy for min_healthy (1000 s) → the budget comes back.
    let h1 = decide(&p, &carry(cluster(CloudView::Healthy), &o4), t(200_000));
    assert_eq!(mem(&h1, "w1").heal_attempts, 2);
    let h2 = decide(&p, &carry(cluster(CloudView::Healthy), &h1), t(201_001));
    assert_eq!(mem(&h2, "w1").heal_attempts, 0);
    let again = decide(&p, &carry(cluster(confirmed()), &h2), t(201_100));
    assert!(again.heal.is_some());
}

#[test]
fn a_replaced_server_keeps_the_budget_but_restarts_counters_and_startup_grace() {
    let p = policy();
    let o1 = decide(&p, &cluster(confirmed()), t(0));
    let mut next = carry(cluster(CloudView::Healthy), &o1);
    next.vnfcs[2].server_id = Some("srv-new".into());
    next.vnfcs[2].recorded_at = t(100);
    next.vnfcs[2].probes = Some(vec![Finding {
        check: "k8s.node_ready".into(),
        verdict: Verdict::Failed,
        detail: "node NotReady".into(),
    }]);
    let o2 = decide(&p, &next, t(120));
    let m = mem(&o2, "w1");
    assert_eq!(m.server_id.as_deref(), Some("srv-new"));
    assert_eq!(m.server_since, Some(t(100)));
    assert_eq!(m.heal_attempts, 1);
    assert!(o2.heal.is_none());
    let d = o2
        .decisions
        .iter()
        .find(|d| d.vnfc_id.as_ref().map(VnfcId::as_str) == Some("w1"))
        .unwrap();
    assert_eq!(d.kind, DecisionKind::DeferredGrace);
    assert!(d.reason.contains("startup grace"), "{}", d.reason);
}

fn probed(findings: Vec<(&str, Verdict)>) -> VnfInput {
    let mut input = cluster(CloudView::Healthy);
    input.pass = "full";
    input.vnfcs[0].probes = Some(
        findings
            .into_iter()
            .map(|(c, v)| Finding {
                check: c.into(),
                verdict: v,
                detail: "d".into(),
            })
            .collect(),
    );
    input
}

#[test]
fn probe_findings_per_row() {
    use DecisionKind::*;
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, Verdict)>,
        Vec<DecisionKind>,
        Option<bool>,
    );
    let cases: Vec<Case> = vec![
        (
            "all in place",
            vec![("nfs.exports", Verdict::InPlace)],
            vec![],
            None,
        ),
        (
            "lost export: configuration repair, not a rebuild",
            vec![
                ("nfs.exports", Verdict::Drift),
                ("nfs.server", Verdict::InPlace),
            ],
            vec![DriftDetected, HealStarted],
            Some(true),
        ),
        (
            "SSH timeout: unknown",
            vec![("nfs.exports", Verdict::Unknown)],
            vec![DeferredUnknown],
            None,
        ),
        (
            "failed probe once: needs a second",
            vec![("k8s.node_ready", Verdict::Failed)],
            vec![DeferredGrace],
            None,
        ),
    ];
    for (name, findings, want, heal) in cases {
        let o = decide(&policy(), &probed(findings), t(0));
        let got: Vec<DecisionKind> = o.decisions.iter().map(|d| d.kind).collect();
        assert_eq!(got, want, "{name}: {:#?}", o.decisions);
        assert_eq!(
            o.heal.as_ref().map(|h| h.configuration_only),
            heal,
            "{name}"
        );
    }
    // Two failed probes spanning the grace → replacement.
    let p = policy();
    let f = vec![("k8s.node_ready", Verdict::Failed)];
    let o1 = decide(&p, &probed(f.clone()), t(0));
    let o2 = decide(&p, &carry(probed(f.clone()), &o1), t(300));
    assert_eq!(o2.heal.as_ref().map(|h| h.configuration_only), Some(false));
    // A cloud-only pass in between neither resets nor counts probe failures.
    let c = decide(&p, &carry(cluster(CloudView::Healthy), &o1), t(15));
    assert_eq!(mem(&c, "ss").probe_failures, 1);
    // Drift within the startup grace waits.
    let mut young = probed(vec![("nfs.exports", Verdict::Drift)]);
    young.vnfcs[0].memory.server_since = Some(t(-30));
    let o = decide(&p, &young, t(0));
    assert!(o.heal.is_none());
    // Startup grace does not delay a confirmed cloud failure.
    let mut young = cluster(confirmed());
    young.vnfcs[2].memory.server_since = Some(t(-30));
    assert!(decide(&p, &young, t(0)).heal.is_some());
}

#[test]
fn storage_server_is_not_replaced_while_a_pv_is_bound_or_phases_are_unknown() {
    let mut input = cluster(CloudView::Healthy);
    input.vnfcs[0].cloud = confirmed();
    for (pvs, want) in [
        (
            PvView::Known {
                bound: vec!["nfs-pv1".into()],
                observed_at: t(-10),
            },
            DecisionKind::PvBoundBlock,
        ),
        (PvView::Unknown, DecisionKind::DeferredUnknown),
    ] {
        input.pvs = pvs;
        let o = decide(&policy(), &input, t(0));
        assert!(o.heal.is_none());
        assert_eq!(kinds(&o), vec![(Some("ss"), want)]);
    }
    input.pvs = PvView::Known {
        bound: vec![],
        observed_at: t(-10),
    };
    let o = decide(&policy(), &input, t(0));
    assert_eq!(o.heal.unwrap().vnfc_ids, vec!["ss".to_string()]);
}

/// A master whose rebuild the flavour refuses is not replaced (an alert says why), while its
/// configuration repair still runs.
#[test]
fn a_rebuild_the_flavour_refuses_is_an_alert_and_a_repair_still_runs() {
    let mut input = cluster(CloudView::Healthy);
    input.vnfcs[1].cloud = confirmed();
    input.vnfcs[1].rebuild_refused = Some("VNFC m0 is a kubespray master".into());
    let o = decide(&policy(), &input, t(0));
    assert!(o.heal.is_none());
    assert_eq!(kinds(&o), vec![(Some("m0"), DecisionKind::RebuildRefused)]);
    assert!(DecisionKind::RebuildRefused.is_alert());
    assert!(o.decisions[0].reason.contains("kubespray master"));

    let mut input = probed(vec![("nfs.client", Verdict::Drift)]);
    for v in &mut input.vnfcs {
        v.rebuild_refused = Some("refused".into());
    }
    let h = decide(&policy(), &input, t(0)).heal.expect("a repair");
    assert!(h.configuration_only);
}

#[test]
fn one_heal_per_vnf_storage_first_then_replacements_then_repairs() {
    let mut input = probed(vec![("nfs.exports", Verdict::Drift)]);
    input.vnfcs[2].cloud = confirmed();
    let o = decide(&policy(), &input, t(0));
    let h = o.heal.unwrap();
    assert_eq!(
        (h.vnfc_ids.clone(), h.configuration_only),
        (vec!["w1".into()], false)
    );
    assert!(
        o.decisions
            .iter()
            .any(|d| d.vnfc_id.as_ref().map(VnfcId::as_str) == Some("ss")
                && d.kind == DecisionKind::InFlight)
    );
    // The storage server is healed alone.
    let mut input = cluster(confirmed());
    input.vnfcs[0].cloud = confirmed();
    let o = decide(&policy(), &input, t(0));
    assert_eq!(o.heal.unwrap().vnfc_ids, vec!["ss".to_string()]);
}

#[test]
fn heal_request_is_the_sol003_body_the_engine_expects() {
    let replace = HealPlan {
        vnfc_ids: vec!["a".into()],
        configuration_only: false,
        cause: "c".into(),
    };
    assert_eq!(
        replace.request(),
        json!({"vnfcInstanceId": ["a"], "cause": "c"})
    );
    let repair = HealPlan {
        configuration_only: true,
        ..replace
    };
    assert_eq!(
        repair.request(),
        json!({"vnfcInstanceId": ["a"], "cause": "c", "additionalParams": {"configuration_only": true}})
    );
    let o = decide(&policy(), &cluster(confirmed()), t(0));
    assert!(!o.heal.unwrap().cause.contains('\n'));
}

#[test]
fn repeated_deferrals_are_marked_so_a_lasting_condition_is_one_row() {
    let p = policy();
    let input = cluster(CloudView::Unknown("compute 503".into()));
    let o1 = decide(&p, &input, t(0));
    assert!(!o1.decisions[0].repeat);
    let o2 = decide(&p, &carry(input.clone(), &o1), t(15));
    assert!(o2.decisions[0].repeat);
    let o3 = decide(&p, &carry(cluster(CloudView::Healthy), &o2), t(30));
    let o4 = decide(&p, &carry(input, &o3), t(45));
    assert!(!o4.decisions[0].repeat, "recorded again after a change");
}

// One test per rule of `rules`, called directly.

#[test]
fn rule_follow_server_restarts_counters_but_keeps_budget_and_last_decision() {
    let mut v = vnfc("w1", Role::Worker, CloudView::Healthy);
    v.memory = Memory {
        server_id: Some("srv-old".into()),
        server_since: Some(t(-5000)),
        cloud_failures: 3,
        cloud_first_failure_at: Some(t(-300)),
        probe_failures: 2,
        probe_first_failure_at: Some(t(-200)),
        healthy_since: Some(t(-9000)),
        heal_attempts: 2,
        last_heal_at: Some(t(-100)),
        last_decision: Some("RECONCILE_DEFERRED_GRACE:x".into()),
    };
    v.server_id = Some("srv-new".into());
    v.recorded_at = t(-50);
    let m = rules::follow_server(&v.memory, &v);
    assert_eq!(
        m,
        Memory {
            server_id: Some("srv-new".into()),
            server_since: Some(t(-50)),
            heal_attempts: 2,
            last_heal_at: Some(t(-100)),
            last_decision: Some("RECONCILE_DEFERRED_GRACE:x".into()),
            ..Memory::default()
        }
    );
    // The same server: the memory as it was.
    v.server_id = Some("srv-old".into());
    assert_eq!(rules::follow_server(&v.memory, &v), v.memory);
}

#[test]
fn rule_confirmation_needs_two_failures_spanning_the_grace_and_startup_grace_ends() {
    let p = policy(); // grace 60 s, startup grace 600 s
    assert!(
        !rules::confirmed(&p, 1, Some(t(-1000)), t(0)),
        "one is never enough"
    );
    assert!(
        !rules::confirmed(&p, 2, Some(t(-59)), t(0)),
        "within the grace"
    );
    assert!(rules::confirmed(&p, 2, Some(t(-60)), t(0)));
    assert!(!rules::confirmed(&p, 5, None, t(0)));
    let young = Memory {
        server_since: Some(t(-599)),
        ..Memory::default()
    };
    assert!(rules::in_startup_grace(&p, &young, t(0)));
    assert!(!rules::in_startup_grace(&p, &young, t(1)));
    assert!(!rules::in_startup_grace(&p, &Memory::default(), t(0)));
}

#[test]
fn rule_cloud_failures_count_and_unknown_or_transitional_change_nothing() {
    let mut m = Memory::default();
    rules::count_cloud_observation(&mut m, &CloudView::Suspect("SHUTOFF".into()), t(0));
    rules::count_cloud_observation(&mut m, &confirmed(), t(10));
    assert_eq!(
        (m.cloud_failures, m.cloud_first_failure_at),
        (2, Some(t(0)))
    );
    for neutral in [
        CloudView::Unknown("503".into()),
        CloudView::Transitional("BUILD".into()),
    ] {
        rules::count_cloud_observation(&mut m, &neutral, t(20));
        assert_eq!(
            (m.cloud_failures, m.cloud_first_failure_at),
            (2, Some(t(0)))
        );
    }
    rules::count_cloud_observation(&mut m, &CloudView::Healthy, t(30));
    assert_eq!((m.cloud_failures, m.cloud_first_failure_at), (0, None));
}

#[test]
fn rule_probes_count_only_on_a_healthy_server_and_unreadable_ones_change_nothing() {
    let finding = |verdict| Finding {
        check: "k8s.node_ready".into(),
        verdict,
        detail: "d".into(),
    };
    let mut v = vnfc("w1", Role::Worker, CloudView::Suspect("SHUTOFF".into()));
    v.probes = Some(vec![finding(Verdict::Failed)]);
    assert_eq!(rules::probe_lines(&v), None, "the cloud view decides alone");
    v.cloud = CloudView::Healthy;
    let failed = rules::probe_lines(&v).unwrap();
    assert_eq!(failed.failed, vec!["k8s.node_ready: d".to_string()]);
    let mut m = Memory::default();
    rules::count_probe_result(&mut m, Some(&failed), t(0));
    rules::count_probe_result(&mut m, Some(&failed), t(10));
    assert_eq!(
        (m.probe_failures, m.probe_first_failure_at),
        (2, Some(t(0)))
    );
    // Unreadable only, or not probed: unchanged.
    v.probes = Some(vec![finding(Verdict::Unknown), finding(Verdict::InPlace)]);
    rules::count_probe_result(&mut m, rules::probe_lines(&v).as_ref(), t(20));
    rules::count_probe_result(&mut m, None, t(30));
    assert_eq!(m.probe_failures, 2);
    // Readable and in place: reset.
    v.probes = Some(vec![finding(Verdict::InPlace)]);
    rules::count_probe_result(&mut m, rules::probe_lines(&v).as_ref(), t(40));
    assert_eq!((m.probe_failures, m.probe_first_failure_at), (0, None));
}

#[test]
fn rule_health_fails_closed_and_tells_repair_from_rebuild() {
    let p = policy();
    let none = rules::ProbeLines::default();
    let m = Memory::default();
    assert_eq!(
        rules::health(&p, &CloudView::Unknown("503".into()), &m, &none, t(0)),
        Status::Unknown("503".into())
    );
    assert_eq!(
        rules::health(&p, &confirmed(), &m, &none, t(0)),
        Status::Needs(Remedy::Rebuild("Nova status ERROR".into()))
    );
    let drift = rules::ProbeLines {
        drift: vec!["nfs.exports: lost".into()],
        unknown: vec!["nfs.server: timeout".into()],
        ..Default::default()
    };
    assert_eq!(
        rules::health(&p, &CloudView::Healthy, &m, &drift, t(0)),
        Status::Needs(Remedy::Repair(vec!["nfs.exports: lost".into()]))
    );
    let unknown = rules::ProbeLines {
        unknown: vec!["nfs.server: timeout".into()],
        ..Default::default()
    };
    assert_eq!(
        rules::health(&p, &CloudView::Healthy, &m, &unknown, t(0)),
        Status::Unknown("nfs.server: timeout".into())
    );
    // A remembered probe failure, confirmed, needs a new server even in a cloud-only pass.
    let failing = Memory {
        probe_failures: 2,
        probe_first_failure_at: Some(t(-100)),
        ..Memory::default()
    };
    assert_eq!(
        rules::health(&p, &CloudView::Healthy, &failing, &none, t(0)),
        Status::Needs(Remedy::Rebuild(
            "earlier probe failure in 2 consecutive probes".into()
        ))
    );
}

#[test]
fn rule_healthy_stretch_gives_the_budget_back_and_unknown_keeps_it_running() {
    let p = policy(); // min_healthy 1000 s
    let mut m = Memory {
        heal_attempts: 2,
        ..Memory::default()
    };
    rules::healthy_stretch(&p, &mut m, &Status::Healthy, t(0));
    assert_eq!(m.healthy_since, Some(t(0)));
    rules::healthy_stretch(&p, &mut m, &Status::Unknown("503".into()), t(500));
    assert_eq!(
        m.healthy_since,
        Some(t(0)),
        "unknown neither ends nor restarts it"
    );
    rules::healthy_stretch(&p, &mut m, &Status::Healthy, t(999));
    assert_eq!(m.heal_attempts, 2);
    rules::healthy_stretch(&p, &mut m, &Status::Healthy, t(1000));
    assert_eq!(m.heal_attempts, 0);
    let waiting = Status::Waiting {
        reason: "BUILD".into(),
        failing: false,
    };
    rules::healthy_stretch(&p, &mut m, &waiting, t(1001));
    assert_eq!(m.healthy_since, None);
}

#[test]
fn rule_storm_control_counts_rebuilds_and_failing_waits_only() {
    let p = Policy {
        max_unhealthy: MaxUnhealthy::Count(1),
        ..policy()
    };
    let rebuild = Status::Needs(Remedy::Rebuild("ERROR".into()));
    let repair = Status::Needs(Remedy::Repair(vec!["drift".into()]));
    let failing = Status::Waiting {
        reason: "SHUTOFF".into(),
        failing: true,
    };
    let settling = Status::Waiting {
        reason: "BUILD".into(),
        failing: false,
    };
    let unknown = Status::Unknown("503".into());
    let calm = [
        ("a", &rebuild),
        ("b", &repair),
        ("c", &settling),
        ("d", &unknown),
    ];
    assert_eq!(rules::storm_control(&p, &calm, "cloud"), None);
    let storm = [("a", &rebuild), ("b", &failing), ("c", &repair)];
    let r = rules::storm_control(&p, &storm, "cloud").unwrap();
    assert_eq!(r.ruling.kind, DecisionKind::ShortCircuit);
    assert_eq!(r.evidence["unhealthy"], json!(["a", "b"]));
    assert_eq!(r.evidence["allowed"], json!(1));
}

#[test]
fn rule_retry_budget_and_backoff_doubles_per_attempt() {
    let p = Policy {
        retry_budget: 4,
        ..policy() // backoff 100 s
    };
    let after = |attempts: u32, last: Option<Timestamp>, now: i64| {
        let m = Memory {
            heal_attempts: attempts,
            last_heal_at: last,
            ..Memory::default()
        };
        (
            rules::retry_budget(&p, &m).map(|r| r.kind),
            rules::backoff(&p, &m, t(now)).map(|r| r.kind),
        )
    };
    // The first attempt never waits, even right after an earlier (reset) heal.
    assert_eq!(after(0, Some(t(0)), 0), (None, None));
    // Attempt 2 waits 200 s, attempt 3 400 s, attempt 4 800 s.
    let deferred = Some(DecisionKind::DeferredBackoff);
    for (attempts, wait) in [(1, 200), (2, 400), (3, 800)] {
        assert_eq!(after(attempts, Some(t(0)), wait - 1), (None, deferred));
        assert_eq!(after(attempts, Some(t(0)), wait), (None, None));
    }
    // Budget used up: an alert, whatever the backoff.
    assert_eq!(
        after(4, Some(t(0)), 1_000_000).0,
        Some(DecisionKind::BudgetExhausted)
    );
    let mut m = Memory::default();
    rules::spend_attempt(&mut m, t(7));
    assert_eq!((m.heal_attempts, m.last_heal_at), (1, Some(t(7))));
}

#[test]
fn rule_keep_data_blocks_only_a_storage_server_rebuild() {
    let bound = PvView::Known {
        bound: vec!["nfs-pv1".into()],
        observed_at: t(0),
    };
    let rebuild = Remedy::Rebuild("ERROR".into());
    let repair = Remedy::Repair(vec!["nfs.exports: lost".into()]);
    let kind =
        |role, remedy: &Remedy, pvs: &PvView| rules::keep_data(role, remedy, pvs).map(|r| r.kind);
    assert_eq!(
        kind(Role::StorageServer, &rebuild, &bound),
        Some(DecisionKind::PvBoundBlock)
    );
    assert_eq!(
        kind(Role::StorageServer, &rebuild, &PvView::Unknown),
        Some(DecisionKind::DeferredUnknown)
    );
    assert_eq!(
        kind(Role::StorageServer, &rebuild, &PvView::NotApplicable),
        None
    );
    assert_eq!(
        kind(Role::StorageServer, &repair, &bound),
        None,
        "a repair keeps the data"
    );
    assert_eq!(kind(Role::Worker, &rebuild, &bound), None);
}

#[test]
fn rule_one_heal_per_vnf_storage_alone_then_rebuilds_one_master_at_a_time_then_repairs() {
    let c = |index, role, remedy: &str| Candidate {
        index,
        role,
        remedy: if remedy == "rebuild" {
            Remedy::Rebuild(format!("why{index}"))
        } else {
            Remedy::Repair(vec![format!("drift{index}")])
        },
    };
    assert_eq!(rules::one_heal_per_vnf(&[]), None);
    let all = [
        c(0, Role::Worker, "repair"),
        c(1, Role::Worker, "rebuild"),
        c(2, Role::StorageServer, "rebuild"),
        c(3, Role::Master, "rebuild"),
    ];
    let sel = rules::one_heal_per_vnf(&all).unwrap();
    assert_eq!(sel.chosen, vec![(2, "why2".to_string())]);
    assert!(!sel.configuration_only);
    assert_eq!(sel.waiting, vec![1, 3, 0]);
    let sel = rules::one_heal_per_vnf(&[all[0].clone(), all[1].clone(), all[3].clone()]).unwrap();
    assert_eq!(sel.chosen, vec![(1, "why1".into()), (3, "why3".into())]);
    assert_eq!(sel.waiting, vec![0]);
    let sel =
        rules::one_heal_per_vnf(&[all[0].clone(), c(4, Role::StorageServer, "repair")]).unwrap();
    assert_eq!(sel.chosen, vec![(0, "drift0".into()), (4, "drift4".into())]);
    assert!(sel.configuration_only);
    assert!(sel.waiting.is_empty());
    // Masters are rebuilt one at a time: the first with the workers, the others wait.
    let sel = rules::one_heal_per_vnf(&[
        c(5, Role::Master, "rebuild"),
        c(6, Role::Worker, "rebuild"),
        c(7, Role::Master, "rebuild"),
        all[0].clone(),
    ])
    .unwrap();
    assert_eq!(sel.chosen, vec![(5, "why5".into()), (6, "why6".into())]);
    assert_eq!(sel.waiting, vec![7, 0]);
}

#[test]
fn rule_repeats_are_marked_per_vnfc_and_a_started_heal_never_is() {
    let d = |kind, reason: &str| Decision {
        vnf_instance_id: "vnf-1".into(),
        vnfc_id: Some("w1".into()),
        kind,
        reason: reason.into(),
        evidence: Value::Null,
        repeat: false,
    };
    let mut memory = vec![
        Memory {
            last_decision: Some("RECONCILE_DEFERRED_GRACE:SHUTOFF: failed observation  of ".into()),
            ..Memory::default()
        },
        Memory {
            last_decision: Some("RECONCILE_HEAL_STARTED:x".into()),
            ..Memory::default()
        },
        Memory {
            last_decision: Some("RECONCILE_DEFERRED_UNKNOWN:y".into()),
            ..Memory::default()
        },
    ];
    let mut decisions = vec![
        (
            0,
            d(
                DecisionKind::DeferredGrace,
                "SHUTOFF: failed observation 2 of 2",
            ),
        ),
        (1, d(DecisionKind::HealStarted, "x")),
    ];
    rules::mark_repeats(&mut decisions, &mut memory);
    assert!(decisions[0].1.repeat, "digits aside, the same condition");
    assert!(!decisions[1].1.repeat);
    assert_eq!(
        memory[1].last_decision.as_deref(),
        Some("RECONCILE_HEAL_STARTED:x")
    );
    assert_eq!(
        memory[2].last_decision, None,
        "no decision this pass: forgotten"
    );
    // VNF level: the same, against the VNF's memory.
    let mut vnf_memory = Memory::default();
    let r = rules::VnfRuling {
        ruling: Ruling::new(DecisionKind::ShortCircuit, "3 of 5".into()),
        evidence: Value::Null,
    };
    assert!(!rules::vnf_decision(&mut vnf_memory, &VnfInstanceId::from("vnf-1"), r.clone()).repeat);
    assert!(rules::vnf_decision(&mut vnf_memory, &VnfInstanceId::from("vnf-1"), r).repeat);
}

#[test]
fn rule_one_operation_per_vnf_names_the_oldest_and_the_servers_not_healthy() {
    let mut input = cluster(confirmed());
    assert_eq!(rules::one_operation_per_vnf(&input), None);
    input.unfinished_operations = vec!["op-1".into(), "op-2".into()];
    let r = rules::one_operation_per_vnf(&input).unwrap().unwrap();
    assert_eq!(r.ruling.kind, DecisionKind::InFlight);
    assert!(r.ruling.reason.contains("op-1"), "{}", r.ruling.reason);
    assert_eq!(r.evidence["not_healthy"][0]["vnfc_id"], json!("w1"));
    let mut calm = cluster(CloudView::Healthy);
    calm.unfinished_operations = vec!["op-1".into()];
    assert_eq!(rules::one_operation_per_vnf(&calm), Some(None));
}

#[test]
fn a_paused_vnf_is_observed_but_not_healed_until_the_pause_ends() {
    use crate::model::{MaintenancePause, PauseScope};
    let pause = MaintenancePause {
        scope: PauseScope::Vnf("vnf-1".into()),
        paused_by: "uid 0 (root)".into(),
        reason: Some("kernel upgrade".into()),
        since: t(0),
        until: Some(t(100)),
    };
    let mut input = cluster(confirmed());
    input.pause = Some(pause);
    let o = decide(&policy(), &input, t(10));
    assert_eq!(o.heal, None);
    assert_eq!(kinds(&o), vec![(Some("w1"), DecisionKind::Paused)]);
    let d = &o.decisions[0];
    assert!(
        d.reason.contains(
            "server replacement held by a maintenance pause (paused by uid 0 (root) until"
        ),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("kernel upgrade"), "{}", d.reason);
    assert_eq!(d.evidence["pause"]["until"], t(100).to_rfc3339());
    assert_eq!(d.evidence["cloud"]["state"], "confirmed");
    // Observed as usual, no attempt spent.
    assert_eq!(mem(&o, "w1").cloud_failures, 1);
    assert_eq!(mem(&o, "w1").heal_attempts, 0);
    // The next pass under the same pause records nothing new.
    let next = carry(input.clone(), &o);
    let o2 = decide(&policy(), &next, t(20));
    assert!(
        o2.heal.is_none() && o2.decisions.iter().all(|d| d.repeat),
        "{o2:#?}"
    );
    // At `until` the pause no longer holds: the heal starts.
    let o3 = decide(&policy(), &carry(next, &o2), t(100));
    assert_eq!(
        o3.heal.as_ref().map(|h| h.vnfc_ids.clone()),
        Some(vec![VnfcId::from("w1")])
    );
    assert_eq!(mem(&o3, "w1").heal_attempts, 1);
}
