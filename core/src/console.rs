//! SSH host keys in a server's console output, as cloud-init prints them at the end of boot
//! (its `cc_keys_to_console` module runs `write-ssh-key-fingerprints`): a fingerprint block
//!
//! ```text
//! <14>Nov 24 03:20:01 cloud-init: -----BEGIN SSH HOST KEY FINGERPRINTS-----
//! <14>Nov 24 03:20:01 cloud-init: 256 SHA256:U2n2I1UYgj1BSdckUyZctgaWW8CSlL+QfXh3bjuiIFY root@vm (ED25519)
//! <14>Nov 24 03:20:01 cloud-init: -----END SSH HOST KEY FINGERPRINTS-----
//! ```
//!
//! (each line possibly behind a syslog-style prefix) and a key block
//!
//! ```text
//! -----BEGIN SSH HOST KEY KEYS-----
//! ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYiNiOOo3XHRcWQS07T3ilpTDJspX52tih3/dP/OhwY root@vm
//! -----END SSH HOST KEY KEYS-----
//! ```
//!
//! The console text is read through Nova's `os-getConsoleOutput` server action (Compute API
//! "Show Console Output") and is written by the guest: the parser treats it as hostile (any size,
//! any bytes, cut anywhere, several boots one after another).

use base64::Engine as _;

/// First line of cloud-init's fingerprint block.
pub const FINGERPRINTS_BEGIN: &str = "-----BEGIN SSH HOST KEY FINGERPRINTS-----";
/// Last line of cloud-init's fingerprint block.
pub const FINGERPRINTS_END: &str = "-----END SSH HOST KEY FINGERPRINTS-----";
/// First line of cloud-init's public key block.
pub const KEYS_BEGIN: &str = "-----BEGIN SSH HOST KEY KEYS-----";
/// Last line of cloud-init's public key block.
pub const KEYS_END: &str = "-----END SSH HOST KEY KEYS-----";

/// A block with more entries than this is not cloud-init's (it prints one per host key type:
/// at most a handful) and is ignored as a whole.
pub const MAX_ENTRIES: usize = 16;
/// Lines longer than this (bytes) are never an entry (a 16384-bit RSA key line is ~2.8 KiB).
pub const MAX_LINE: usize = 8 * 1024;

/// Public key algorithms (RFC 4253 §6.6, RFC 5656 §3.1, RFC 8709 §4, OpenSSH `PROTOCOL.u2f`)
/// whose lines the key block may hold.
const ALGORITHMS: &[&str] = &[
    "ssh-ed25519",
    "ssh-ed448",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "ssh-dss",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// The host keys a console lists: the entries of the last complete fingerprint block and of the
/// last complete key block (a block counts when its BEGIN and END lines were both seen and it
/// holds at least one valid entry and at most [`MAX_ENTRIES`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsoleHostKeys {
    /// SHA256 fingerprints as `ssh-keygen -l` prints them (`SHA256:` + 43 characters of
    /// unpadded standard base64); MD5 entries are not kept.
    pub fingerprints: Vec<String>,
    /// Public keys as `ALGORITHM BASE64` (comment dropped); the blob decodes and names its
    /// algorithm (RFC 4253 §6.6 `string` encoding).
    pub keys: Vec<String>,
}

impl ConsoleHostKeys {
    /// Whether the console lists the key a server presented, given as its SHA256 fingerprint
    /// (`SHA256:…`) and its OpenSSH line (`ALGORITHM BASE64 [comment]`): the fingerprint is in
    /// the fingerprint block, or algorithm and blob are in the key block.
    pub fn lists(&self, fingerprint: &str, key_line: &str) -> bool {
        if self.fingerprints.iter().any(|f| f == fingerprint) {
            return true;
        }
        let mut it = key_line.split_whitespace();
        match (it.next(), it.next()) {
            (Some(a), Some(b)) => {
                let wanted = format!("{a} {b}");
                self.keys.contains(&wanted)
            }
            _ => false,
        }
    }
}

/// How a server's host key was accepted at first contact, before it was pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstContact {
    /// The console output listed the key the server presented.
    Console,
    /// Trust on first use: the console held no host key block (or the cloud gave none).
    TrustOnFirstUse,
}

impl FirstContact {
    /// Stable name, as stored in the `HOST_KEY_PINNED` event's evidence: `console` or
    /// `trust_on_first_use`.
    pub fn as_str(self) -> &'static str {
        match self {
            FirstContact::Console => "console",
            FirstContact::TrustOnFirstUse => "trust_on_first_use",
        }
    }
}

/// Which block a line opens or closes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fingerprints,
    Keys,
}

/// A block being read: its entries so far, or `None` once it overflowed.
struct Open {
    kind: Kind,
    entries: Option<Vec<String>>,
}

/// The host keys listed in `console` (the text of `os-getConsoleOutput`), or `None` when it holds
/// no complete block of either kind — cloud-init has not printed them yet, the output was cut, or
/// the image does not run cloud-init.
///
/// Rules, for hostile input: lines are split at `\n` (a trailing `\r` dropped); a marker may
/// follow any prefix on its line; a BEGIN while a block is open restarts that block; an END
/// without its BEGIN, a block without its END, a block of another kind's END, and a block with
/// no valid entry or more than [`MAX_ENTRIES`] are ignored; within a block, lines that hold no
/// valid entry (interleaved kernel messages, garbage, lines over [`MAX_LINE`]) are skipped. Of
/// several complete blocks of a kind (one per boot), the last one wins. Linear in the input.
pub fn parse(console: &str) -> Option<ConsoleHostKeys> {
    let mut fingerprints: Option<Vec<String>> = None;
    let mut keys: Option<Vec<String>> = None;
    let mut open: Option<Open> = None;
    for raw in console.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.len() > MAX_LINE {
            continue;
        }
        if let Some(kind) = marker(line, FINGERPRINTS_BEGIN, KEYS_BEGIN) {
            open = Some(Open {
                kind,
                entries: Some(Vec::new()),
            });
            continue;
        }
        if let Some(kind) = marker(line, FINGERPRINTS_END, KEYS_END) {
            if let Some(block) = open.take()
                && block.kind == kind
                && let Some(entries) = block.entries.filter(|e| !e.is_empty())
            {
                match kind {
                    Kind::Fingerprints => fingerprints = Some(entries),
                    Kind::Keys => keys = Some(entries),
                }
            }
            continue;
        }
        let Some(block) = open.as_mut() else { continue };
        let entry = match block.kind {
            Kind::Fingerprints => fingerprint_entry(line),
            Kind::Keys => key_entry(line),
        };
        if let (Some(e), Some(entries)) = (entry, block.entries.as_mut()) {
            if entries.len() == MAX_ENTRIES {
                block.entries = None;
            } else if !entries.contains(&e) {
                entries.push(e);
            }
        }
    }
    if fingerprints.is_none() && keys.is_none() {
        return None;
    }
    Some(ConsoleHostKeys {
        fingerprints: fingerprints.unwrap_or_default(),
        keys: keys.unwrap_or_default(),
    })
}

/// The block kind whose marker (`fingerprints` or `keys` form) ends `line` (after any prefix).
fn marker(line: &str, fingerprints: &str, keys: &str) -> Option<Kind> {
    let line = line.trim_end();
    if line.ends_with(fingerprints) {
        Some(Kind::Fingerprints)
    } else if line.ends_with(keys) {
        Some(Kind::Keys)
    } else {
        None
    }
}

/// `SHA256:…` from a line like `256 SHA256:… root@vm (ED25519)`, after any prefix.
fn fingerprint_entry(line: &str) -> Option<String> {
    line.split_whitespace().find_map(|t| {
        let b64 = t.strip_prefix("SHA256:")?;
        // 32 bytes of SHA-256 in unpadded standard base64 are 43 characters.
        let ok = b64.len() == 43
            && base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(b64)
                .is_ok_and(|d| d.len() == 32);
        ok.then(|| t.to_owned())
    })
}

/// `ALGORITHM BASE64` from an OpenSSH public key line, after any prefix; the blob must decode and
/// start with the algorithm name as an RFC 4253 §5 `string`.
fn key_entry(line: &str) -> Option<String> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    tokens.windows(2).find_map(|w| {
        let (alg, b64) = (w[0], w[1]);
        if !ALGORITHMS.contains(&alg) {
            return None;
        }
        let blob = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        let len = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
        (blob.get(4..4 + len)? == alg.as_bytes()).then(|| format!("{alg} {b64}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real ed25519 key and its fingerprint (`ssh-keygen -lf`).
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYiNiOOo3XHRcWQS07T3ilpTDJspX52tih3/dP/OhwY";
    const FP: &str = "SHA256:U2n2I1UYgj1BSdckUyZctgaWW8CSlL+QfXh3bjuiIFY";
    const OTHER_FP: &str = "SHA256:AAAAI1UYgj1BSdckUyZctgaWW8CSlL+QfXh3bjuiIFY";

    fn cloud_init(fp: &str, key: &str) -> String {
        format!(
            "[   12.1] cloud-init[812]: Cloud-init v. 24.1 running 'modules:final'\r\n\
             <14>Nov 24 03:20:01 cloud-init: #############################################################\r\n\
             <14>Nov 24 03:20:01 cloud-init: {FINGERPRINTS_BEGIN}\r\n\
             <14>Nov 24 03:20:01 cloud-init: 1024 SHA256:not-a-real-one root@vm (DSA)\r\n\
             <14>Nov 24 03:20:01 cloud-init: 256 {fp} root@vm (ED25519)\r\n\
             <14>Nov 24 03:20:01 cloud-init: 2048 MD5:12:f8:7e:78:61:b4:bf:e2:de:24:15:96:4e:d4:72:53 root@vm (RSA)\r\n\
             <14>Nov 24 03:20:01 cloud-init: {FINGERPRINTS_END}\r\n\
             <14>Nov 24 03:20:01 cloud-init: #############################################################\r\n\
             {KEYS_BEGIN}\r\n{key} root@vm\r\n{KEYS_END}\r\n\
             [   13.0] cloud-init[812]: Cloud-init v. 24.1 finished\r\n"
        )
    }

    #[test]
    fn reads_both_blocks_as_cloud_init_prints_them() {
        let got = parse(&cloud_init(FP, KEY)).unwrap();
        assert_eq!(got.fingerprints, vec![FP.to_string()]);
        assert_eq!(got.keys, vec![KEY.to_string()]);
        assert!(got.lists(FP, "ssh-ed25519 AAAAother"));
        assert!(got.lists(OTHER_FP, &format!("{KEY} a comment")));
        assert!(!got.lists(OTHER_FP, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIother"));
        assert!(!got.lists(OTHER_FP, ""));
    }

    #[test]
    fn nothing_complete_is_none() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("login: \n"), None);
        // Cut before the END line (cloud-init still printing, or `length` cut the end).
        let text = cloud_init(FP, KEY);
        let cut = &text[..text.find(FINGERPRINTS_END).unwrap()];
        assert_eq!(parse(cut), None);
        // Cut after the BEGIN line (the `length` window starts inside the block).
        let tail = &text[text.find("256 SHA256").unwrap()..text.find(KEYS_BEGIN).unwrap()];
        assert_eq!(parse(tail), None);
        // A complete block without a valid entry.
        assert_eq!(
            parse(&format!(
                "{FINGERPRINTS_BEGIN}\nno keys here\n{FINGERPRINTS_END}\n"
            )),
            None
        );
        // A block closed by the other kind's END.
        assert_eq!(
            parse(&format!(
                "{FINGERPRINTS_BEGIN}\n256 {FP} x (ED25519)\n{KEYS_END}\n"
            )),
            None
        );
    }

    #[test]
    fn the_last_complete_block_wins() {
        let first = cloud_init(OTHER_FP, KEY);
        let second = cloud_init(FP, KEY);
        let got = parse(&format!("{first}{second}")).unwrap();
        assert_eq!(got.fingerprints, vec![FP.to_string()]);
        // A later incomplete block does not replace an earlier complete one.
        let partial = format!("{FINGERPRINTS_BEGIN}\n256 {OTHER_FP} root@vm (ED25519)\n");
        let got = parse(&format!("{second}{partial}")).unwrap();
        assert_eq!(got.fingerprints, vec![FP.to_string()]);
        // A BEGIN inside an open block restarts it.
        let text = format!(
            "{FINGERPRINTS_BEGIN}\n256 {OTHER_FP} a (ED25519)\n{FINGERPRINTS_BEGIN}\n256 {FP} b (ED25519)\n{FINGERPRINTS_END}\n"
        );
        assert_eq!(parse(&text).unwrap().fingerprints, vec![FP.to_string()]);
    }

    #[test]
    fn hostile_entries_are_skipped_or_void_the_block() {
        // Bad base64, wrong length, a key blob naming another algorithm, interleaved noise.
        let text = format!(
            "{KEYS_BEGIN}\n\
             ssh-ed25519 !!!notbase64\n\
             ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIGYiNiOOo3XHRcWQS07T3ilpTDJspX52tih3/dP/OhwY\n\
             [ 9.9] random: crng init done\n\
             {KEY}\n\
             {KEYS_END}\n\
             {FINGERPRINTS_BEGIN}\n256 SHA256:short x (ED25519)\n256 SHA256:{long} x (ED25519)\n{FINGERPRINTS_END}\n",
            long = "A".repeat(44)
        );
        let got = parse(&text).unwrap();
        assert_eq!(got.keys, vec![KEY.to_string()]);
        assert!(got.fingerprints.is_empty());
        // Too many entries: the whole block is ignored.
        let many: String = (0..=MAX_ENTRIES)
            .map(|i| format!("256 SHA256:{i:A<42}A x (ED25519)\n"))
            .collect();
        assert_eq!(
            parse(&format!("{FINGERPRINTS_BEGIN}\n{many}{FINGERPRINTS_END}\n")),
            None
        );
        // An over-long line is never an entry.
        let long = format!("{} {FP} x (ED25519)", "x".repeat(MAX_LINE));
        assert_eq!(
            parse(&format!(
                "{FINGERPRINTS_BEGIN}\n{long}\n{FINGERPRINTS_END}\n"
            )),
            None
        );
    }

    #[test]
    fn large_garbage_is_linear_and_finds_the_block_at_the_end() {
        let mut text = String::with_capacity(4 << 20);
        for i in 0..100_000 {
            text.push_str(&format!(
                "[{i}] noise {FINGERPRINTS_END} {KEYS_BEGIN} \u{0}\u{7f}\n"
            ));
        }
        text.push_str(&cloud_init(FP, KEY));
        let got = parse(&text).unwrap();
        assert_eq!(got.fingerprints, vec![FP.to_string()]);
    }
}
