//! `ansible-playbook`'s output as data: the events of the `ansible.posix.jsonl` stdout callback
//! (collection `ansible.posix` ≥ 1.5.2, shipped by Debian 12's `ansible` package and by pip's
//! `ansible` bundle), one JSON object per line, written as each event happens.
//!
//! The events read here (`_event`): `v2_playbook_on_play_start` (`play.name`),
//! `v2_playbook_on_task_start`, `v2_playbook_on_handler_task_start` and `v2_runner_on_start`
//! (`task.name`; the last with strategies other than `linear`), `v2_runner_on_ok`,
//! `v2_runner_on_failed`, `v2_runner_on_unreachable` and `v2_runner_on_skipped` (`task.name` and
//! `hosts`: the one inventory host the result is for → Ansible's result object), and
//! `v2_playbook_on_stats` (`stats`: inventory host → `ok`, `changed`, `unreachable`,
//! `failures`, `skipped`, `rescued`, `ignored`, the counts of the play recap). Other events and
//! lines that are no event (a callback that is not the JSON one, text the step script prints)
//! change nothing.
//!
//! The callback does not mark a failure that `ignore_errors` or a `rescue` block absorbed; the
//! stats count it under `ignored`/`rescued` instead of `failures`. So the verdict comes from the
//! stats alone, and a failing host is named with its **last** failed (or unreachable) result: the
//! one that stopped it.
//!
//! Everything taken from the output is remote text: bounded ([`MESSAGE_LIMIT`]), one line, no
//! control characters. It may still hold a secret the output held: callers mask what they show.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The stdout callback to run `ansible-playbook` with (`ANSIBLE_STDOUT_CALLBACK`).
pub const STDOUT_CALLBACK: &str = "ansible.posix.jsonl";

/// At most this many characters of a name or message taken from the output.
pub const MESSAGE_LIMIT: usize = 300;

/// The counts of one host in the play recap (`v2_playbook_on_stats`), as Ansible names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct HostStats {
    /// Tasks that ran without change.
    pub ok: u64,
    /// Tasks that changed something.
    pub changed: u64,
    /// Connection failures (the host was given up).
    pub unreachable: u64,
    /// Failed tasks not ignored and not rescued.
    pub failures: u64,
    /// Skipped tasks.
    pub skipped: u64,
    /// Failures a `rescue` block handled.
    pub rescued: u64,
    /// Failures `ignore_errors` let pass.
    pub ignored: u64,
}

impl HostStats {
    /// No failure and no unreachable.
    pub fn clean(&self) -> bool {
        self.failures == 0 && self.unreachable == 0
    }
}

/// A result that stopped a host: its last `v2_runner_on_failed` or `v2_runner_on_unreachable`.
/// Every text is cleaned: one line of at most [`MESSAGE_LIMIT`] characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure {
    /// Inventory host name.
    pub host: String,
    /// The task's name.
    pub task: String,
    /// Unreachable rather than failed.
    pub unreachable: bool,
    /// The result's `msg` (and the last line of its `stderr`, if any); may be empty.
    pub message: String,
}

/// What a run's events said: the play recap, once its stats event arrived, and the last failure
/// of each host in the order they happened. Fed line by line ([`PlaybookRun::feed`]) while the
/// run streams, or at once ([`PlaybookRun::parse`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlaybookRun {
    /// Host → counts, from the last stats event; `None` until one arrived.
    pub stats: Option<BTreeMap<String, HostStats>>,
    /// The last failure of each host, in the order they happened.
    failed: Vec<TaskFailure>,
    /// Events read.
    pub events: u64,
}

#[derive(Deserialize)]
#[serde(tag = "_event")]
enum Event {
    #[serde(rename = "v2_playbook_on_play_start")]
    PlayStart { play: Named },
    #[serde(
        rename = "v2_playbook_on_task_start",
        alias = "v2_playbook_on_handler_task_start",
        alias = "v2_runner_on_start"
    )]
    TaskStart { task: Named },
    #[serde(rename = "v2_runner_on_ok")]
    Ok(Results),
    #[serde(rename = "v2_runner_on_failed")]
    Failed(Results),
    #[serde(rename = "v2_runner_on_unreachable")]
    Unreachable(Results),
    #[serde(rename = "v2_runner_on_skipped")]
    Skipped(Results),
    #[serde(rename = "v2_playbook_on_stats")]
    Stats { stats: BTreeMap<String, HostStats> },
}

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Results {
    task: Named,
    hosts: BTreeMap<String, HostResult>,
}

#[derive(Deserialize)]
struct HostResult {
    #[serde(default)]
    changed: Option<serde_json::Value>,
    #[serde(default)]
    msg: Option<serde_json::Value>,
    #[serde(default)]
    stderr: Option<serde_json::Value>,
}

impl HostResult {
    fn message(&self) -> String {
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut m = self.msg.as_ref().map(text).unwrap_or_default();
        let err = self.stderr.as_ref().map(text).unwrap_or_default();
        if let Some(last) = err.lines().rev().find(|l| !l.trim().is_empty()) {
            if !m.is_empty() {
                m.push_str(": ");
            }
            m.push_str(last.trim());
        }
        clean(&m)
    }

    fn changed(&self) -> bool {
        self.changed.as_ref().and_then(serde_json::Value::as_bool) == Some(true)
    }
}

/// `s` as one line: control characters as spaces, runs of white space as one space; longer than
/// [`MESSAGE_LIMIT`] characters, its start and its end around ` … ` (an SSH failure's reason is
/// its last line, after a banner), [`MESSAGE_LIMIT`] characters in all.
fn clean(s: &str) -> String {
    let words: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    let one = words.join(" ");
    let n = one.chars().count();
    if n <= MESSAGE_LIMIT {
        return one;
    }
    let head = (MESSAGE_LIMIT - 3) / 2;
    let tail = MESSAGE_LIMIT - 3 - head;
    let start: String = one.chars().take(head).collect();
    let end: String = one.chars().skip(n - tail).collect();
    format!("{} … {}", start.trim_end(), end.trim_start())
}

impl PlaybookRun {
    /// Reads every line of `output`.
    pub fn parse(output: &str) -> Self {
        let mut run = Self::default();
        for line in output.lines() {
            run.feed(line);
        }
        run
    }

    /// Reads one line of output; returns what an operator reads of it, one entry per line of
    /// text: `PLAY [name]`, `TASK [name]`, `ok: [host]`, `changed: [host]`, `skipping: [host]`,
    /// `failed: [host]: message`, `unreachable: [host]: message`, and `PLAY RECAP host : ok=N
    /// changed=N unreachable=N failed=N skipped=N rescued=N ignored=N` per host. A line that is
    /// no event is given back as it is unless it looks like JSON (a piece of an event too long
    /// for one line, or an event not read here): nothing then.
    pub fn feed(&mut self, line: &str) -> Vec<String> {
        let t = line.trim();
        if t.is_empty() {
            return Vec::new();
        }
        let Ok(event) = serde_json::from_str::<Event>(t) else {
            return if t.starts_with('{') {
                Vec::new()
            } else {
                vec![line.to_owned()]
            };
        };
        self.events += 1;
        match event {
            Event::PlayStart { play } => vec![format!("PLAY [{}]", clean(&play.name))],
            Event::TaskStart { task } => vec![format!("TASK [{}]", clean(&task.name))],
            Event::Ok(r) => r
                .hosts
                .iter()
                .map(|(h, res)| {
                    let what = if res.changed() { "changed" } else { "ok" };
                    format!("{what}: [{}]", clean(h))
                })
                .collect(),
            Event::Skipped(r) => r
                .hosts
                .keys()
                .map(|h| format!("skipping: [{}]", clean(h)))
                .collect(),
            Event::Failed(r) => self.failure(r, false),
            Event::Unreachable(r) => self.failure(r, true),
            Event::Stats { stats } => {
                let lines = stats
                    .iter()
                    .map(|(h, s)| {
                        format!(
                            "PLAY RECAP {} : ok={} changed={} unreachable={} failed={} skipped={} rescued={} ignored={}",
                            clean(h),
                            s.ok,
                            s.changed,
                            s.unreachable,
                            s.failures,
                            s.skipped,
                            s.rescued,
                            s.ignored
                        )
                    })
                    .collect();
                self.stats = Some(stats);
                lines
            }
        }
    }

    fn failure(&mut self, r: Results, unreachable: bool) -> Vec<String> {
        let task = clean(&r.task.name);
        let mut lines = Vec::new();
        for (h, res) in &r.hosts {
            let f = TaskFailure {
                host: clean(h),
                task: task.clone(),
                unreachable,
                message: res.message(),
            };
            let what = if unreachable { "unreachable" } else { "failed" };
            lines.push(format!("{what}: [{}]: {}", f.host, f.message));
            self.failed.retain(|o| o.host != f.host);
            self.failed.push(f);
        }
        lines
    }

    /// The stats arrived and every host has no failure and is not unreachable.
    pub fn succeeded(&self) -> bool {
        self.stats
            .as_ref()
            .is_some_and(|s| s.values().all(HostStats::clean))
    }

    /// The failures that stopped hosts: with stats, the last failure of each host the stats
    /// count as failed or unreachable; before them (a run that was cut short), the last of each
    /// host that failed so far.
    pub fn failures(&self) -> Vec<&TaskFailure> {
        self.failed
            .iter()
            .filter(|f| match &self.stats {
                Some(s) => s.get(&f.host).is_some_and(|c| !c.clean()),
                None => true,
            })
            .collect()
    }

    /// One line naming each failed host, the task it failed at and the message, e.g. `host
    /// worker1 unreachable at task "Gathering Facts": Failed to connect …`; hosts whose stats
    /// count a failure without a failure event read are named with their counts; without stats,
    /// `no play recap (stats event) in the output` ends the line.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let failures = self.failures();
        for f in &failures {
            let what = if f.unreachable {
                "unreachable at"
            } else {
                "failed"
            };
            let mut part = format!("host {} {what} task \"{}\"", f.host, f.task);
            if !f.message.is_empty() {
                part.push_str(&format!(": {}", f.message));
            }
            parts.push(part);
        }
        match &self.stats {
            Some(stats) => {
                for (h, c) in stats {
                    if !c.clean() && !failures.iter().any(|f| &f.host == h) {
                        parts.push(format!(
                            "host {} failed={} unreachable={}",
                            clean(h),
                            c.failures,
                            c.unreachable
                        ));
                    }
                }
            }
            None => parts.push("no play recap (stats event) in the output".into()),
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests;
