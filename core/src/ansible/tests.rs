//! The reader against real `ansible-playbook` output: `testdata/*.jsonl` were captured with
//! Debian 12's `ansible` (ansible.posix 1.5.4) by `testdata/capture.sh`;
//! `tests/engine/engine_ansible_events.rs` checks at test time that a fresh run still reads the
//! same.

use super::*;

const FAILING: &str = include_str!("testdata/failing.jsonl");
const CLEAN: &str = include_str!("testdata/clean.jsonl");

#[test]
fn a_failed_run_names_the_hosts_that_stopped_with_task_and_message() {
    let run = PlaybookRun::parse(FAILING);
    assert!(!run.succeeded());
    let stats = run.stats.as_ref().unwrap();
    assert_eq!(stats["worker1"].failures, 1);
    assert_eq!(stats["worker10"].unreachable, 1);
    // The ignored and the rescued failure are counted as such, not as failures.
    assert_eq!(stats["master1"].ignored, 1);
    assert_eq!(stats["master1"].rescued, 1);
    assert!(stats["master1"].clean());
    assert_eq!(
        run.failures(),
        [
            &TaskFailure {
                host: "worker10".into(),
                task: "Check hostname".into(),
                unreachable: true,
                message: "Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 \
                          port 1: Connection refused"
                    .into(),
            },
            &TaskFailure {
                host: "worker1".into(),
                task: "Join the cluster".into(),
                unreachable: false,
                message: "non-zero return code: kubeadm join refused".into(),
            },
        ]
    );
    assert_eq!(
        run.summary(),
        "host worker10 unreachable at task \"Check hostname\": Failed to connect to the host via \
         ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused; host worker1 failed task \
         \"Join the cluster\": non-zero return code: kubeadm join refused"
    );
}

#[test]
fn a_clean_run_succeeds() {
    let run = PlaybookRun::parse(CLEAN);
    assert!(run.succeeded(), "{}", run.summary());
    assert!(run.failures().is_empty());
    assert_eq!(run.summary(), "");
    let stats = run.stats.unwrap();
    assert_eq!(stats.keys().collect::<Vec<_>>(), ["master1", "worker1"]);
    assert_eq!(stats["worker1"].changed, 1);
}

#[test]
fn the_journal_reads_like_ansible_s_own_lines() {
    let mut run = PlaybookRun::default();
    let lines: Vec<String> = FAILING.lines().flat_map(|l| run.feed(l)).collect();
    for want in [
        "PLAY [Prepare nodes]",
        "TASK [Join the cluster]",
        "changed: [master1]",
        "ok: [master1]",
        "skipping: [worker1]",
        "failed: [worker1]: non-zero return code: kubeadm join refused",
        "unreachable: [worker10]: Failed to connect to the host via ssh: ssh: connect to host \
         127.0.0.1 port 1: Connection refused",
        "PLAY RECAP worker1 : ok=2 changed=2 unreachable=0 failed=1 skipped=1 rescued=0 ignored=1",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want} in {lines:#?}");
    }
    assert_eq!(run, PlaybookRun::parse(FAILING));
}

#[test]
fn a_run_without_stats_fails_and_says_so() {
    // Cut before the stats event (the run was killed): the failures so far are named.
    let cut: String = FAILING
        .lines()
        .filter(|l| !l.contains("v2_playbook_on_stats"))
        .map(|l| format!("{l}\n"))
        .collect();
    let run = PlaybookRun::parse(&cut);
    assert!(!run.succeeded());
    let s = run.summary();
    assert!(
        s.ends_with("no play recap (stats event) in the output"),
        "{s}"
    );
    assert!(
        s.contains("host worker1 failed task \"Join the cluster\""),
        "{s}"
    );
    // Without events at all: nothing succeeded.
    let none = PlaybookRun::parse("ERROR! Invalid callback for stdout specified\n");
    assert!(!none.succeeded());
    assert_eq!(none.events, 0);
    assert_eq!(none.summary(), "no play recap (stats event) in the output");
}

#[test]
fn text_and_pieces_of_json_are_not_events() {
    let mut run = PlaybookRun::default();
    assert_eq!(run.feed("cluster.yml done"), ["cluster.yml done"]);
    // A line cut by the engine's line limit (its rest is dropped): a piece of an event is not
    // shown.
    let stats = FAILING.lines().last().unwrap();
    assert!(run.feed(&stats[..stats.len() / 2]).is_empty());
    assert!(
        run.feed(r#"{"_event":"v2_playbook_on_no_hosts_matched"}"#)
            .is_empty()
    );
    assert_eq!(run.events, 0);
    assert!(run.stats.is_none());
}

#[test]
fn messages_are_bounded_single_lines() {
    let long = "x".repeat(5000);
    let line = format!(
        r#"{{"_event":"v2_runner_on_failed","task":{{"name":"t\u0007"}},"hosts":{{"h\nx":{{"msg":"a\n  b{long}","stderr":["not","text"]}}}}}}"#
    );
    let mut run = PlaybookRun::default();
    let out = run.feed(&line);
    assert_eq!(out.len(), 1);
    let f = &run.failures()[0];
    assert_eq!(f.host, "h x");
    assert_eq!(f.task, "t");
    // Its start and its end, around ` … `: an SSH failure's reason is its last line.
    assert!(f.message.starts_with("a bxxx"), "{}", f.message);
    assert!(f.message.contains("x … x"), "{}", f.message);
    assert!(f.message.chars().count() <= MESSAGE_LIMIT);
    assert!(!out[0].contains('\n'));
}
