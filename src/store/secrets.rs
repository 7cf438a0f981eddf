//! Secrets at rest in the database: request bodies (`vnf_lcm_op_occ.operation_params`) are
//! stored redacted (every secret replaced by `"***"`, [`vnfkeeper_core::wire::redact`]) and the
//! secrets they held are stored apart, in `operation_secrets`, sealed with AES-256-GCM (NIST SP
//! 800-38D) under a key kept in a file only the daemon's user can read. Reads put them back, so
//! the engine and reconcile get the request as received.
//!
//! Why encrypt: the database is readable by group `vnfkeeper` (auditors), the spool's producers,
//! and whoever holds a backup; the key file is not (mode 0600, never in `vnfkeeper backup`).
//!
//! Sealed value: 12-byte random nonce ‖ ciphertext ‖ 16-byte tag, of the JSON object
//! `{pointer: value}`; the associated data is the operation's id, so a sealed value copied to
//! another row does not open.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, Generate, KeyInit, Nonce, Payload};
use aes_gcm::{Aes256Gcm, Key};
use hmac::{Hmac, Mac as _};
use sha2::{Digest as _, Sha256};

use super::{Result, StoreError};
use vnfkeeper_core::model::LcmOperationType;
use vnfkeeper_core::wire::redact::{self, SecretValues};
use vnfkeeper_core::wire::{LcmOperation, request_secret_pointers};

/// File name of the key, in the database's directory or in `$CREDENTIALS_DIRECTORY`.
pub const KEY_FILE: &str = "secrets.key";

/// Length of the key in bytes (AES-256).
const KEY_LEN: usize = 32;
/// Length of the GCM nonce in bytes.
const NONCE_LEN: usize = 12;

/// Prefix of a keyed digest ([`SecretsKey::digest`]) as `intake.content_sha256` and the spool's
/// `.sha256` sidecars hold it; a value without it is a plain SHA-256 an earlier version stored.
pub const DIGEST_PREFIX: &str = "hmac-sha256:";

/// What the digest key is derived with from the secrets key (HMAC-SHA256 of this label).
const DIGEST_LABEL: &[u8] = b"vnfkeeper intake digest";

/// The key that seals request secrets and keys the digests of request files. `Debug` shows
/// where it came from, never the key.
pub struct SecretsKey {
    cipher: Aes256Gcm,
    /// HMAC-SHA256 keyed with the digest key (derived from the secrets key, [`DIGEST_LABEL`]).
    digest: Hmac<Sha256>,
    path: PathBuf,
}

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretsKey({})", self.path.display())
    }
}

/// Where the key is: the systemd credential `secrets.key` when `$CREDENTIALS_DIRECTORY` holds
/// one (systemd.exec `LoadCredential=`/`LoadCredentialEncrypted=`), else `<state_dir>/secrets.key`.
pub fn key_path(state_dir: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY") {
        let p = Path::new(&dir).join(KEY_FILE);
        if p.is_file() {
            return p;
        }
    }
    state_dir.join(KEY_FILE)
}

/// The HMAC that keys digests: its key is HMAC-SHA256(secrets key, [`DIGEST_LABEL`]), so the
/// digests never use the encryption key itself.
fn digest_mac(secrets_key: &[u8]) -> Hmac<Sha256> {
    let mut derive = <Hmac<Sha256> as hmac::Mac>::new_from_slice(secrets_key)
        .expect("HMAC takes any key length");
    derive.update(DIGEST_LABEL);
    let sub = derive.finalize().into_bytes();
    <Hmac<Sha256> as hmac::Mac>::new_from_slice(&sub).expect("HMAC takes any key length")
}

fn key_error(path: &Path, reason: impl std::fmt::Display) -> StoreError {
    StoreError::SecretsKey(format!("{}: {reason}", path.display()))
}

impl SecretsKey {
    /// Reads the key at `path`: exactly 32 bytes. Errors: [`StoreError::SecretsKey`] naming the
    /// file (unreadable, wrong length).
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| key_error(path, e))?;
        let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|_| {
            key_error(
                path,
                format!("is {} bytes, a key is {KEY_LEN}", bytes.len()),
            )
        })?;
        Ok(Self {
            cipher,
            digest: digest_mac(&bytes),
            path: path.to_path_buf(),
        })
    }

    /// Creates a new random key at `path` (mode 0600, never overwriting a file) and returns it.
    /// Errors: [`StoreError::SecretsKey`] (the file exists, I/O, no randomness).
    pub fn create(path: &Path) -> Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let key = Key::<Aes256Gcm>::try_generate().map_err(|e| key_error(path, e))?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| key_error(path, e))?;
        f.write_all(key.as_slice())
            .and_then(|()| f.sync_all())
            .map_err(|e| key_error(path, e))?;
        tracing::info!(key = %path.display(), "created the key that encrypts request secrets in the database");
        Ok(Self {
            cipher: Aes256Gcm::new(&key),
            digest: digest_mac(key.as_slice()),
            path: path.to_path_buf(),
        })
    }

    /// The keyed digest of a request file whose SHA-256 is `sha256`: [`DIGEST_PREFIX`] and the
    /// hex HMAC-SHA256 (RFC 2104) of those 32 bytes under the digest key. Without the key, a
    /// reader of the digest (group `vnfkeeper`, a backup) cannot test guesses of the passwords
    /// the file held; equal files still have equal digests, so duplicates are found.
    pub fn digest(&self, sha256: &[u8; 32]) -> String {
        let mut mac = self.digest.clone();
        mac.update(sha256);
        let tag = mac.finalize().into_bytes();
        format!("{DIGEST_PREFIX}{}", vnfkeeper_core::digest::hex(&tag))
    }

    /// [`SecretsKey::digest`] of the bytes of a request file.
    pub fn digest_of(&self, bytes: &[u8]) -> String {
        self.digest(&Sha256::digest(bytes).into())
    }

    /// The keyed digest replacing `stored`, a value an earlier version stored (the plain hex
    /// SHA-256 of a file); `None` when `stored` is keyed already. A value that is not 64 hex
    /// digits (never written by vnfkeeper) is keyed as its text, so no plain value stays.
    pub fn rekey(&self, stored: &str) -> Option<String> {
        if stored.starts_with(DIGEST_PREFIX) {
            return None;
        }
        let mut sha = [0u8; 32];
        let hex = stored.as_bytes();
        let decoded = hex.len() == 64
            && hex.chunks(2).zip(sha.iter_mut()).all(|(pair, out)| {
                std::str::from_utf8(pair)
                    .ok()
                    .and_then(|p| u8::from_str_radix(p, 16).ok())
                    .map(|b| *out = b)
                    .is_some()
            });
        if !decoded {
            sha = Sha256::digest(hex).into();
        }
        Some(self.digest(&sha))
    }

    /// Seals `secrets` of operation `op_id`. Errors: [`StoreError::Encode`].
    pub fn seal(&self, op_id: &str, secrets: &SecretValues) -> Result<Vec<u8>> {
        let encode = |reason: String| StoreError::Encode {
            column: "operation_secrets",
            reason,
        };
        let plain = serde_json::to_vec(secrets).map_err(|e| encode(e.to_string()))?;
        let nonce = Nonce::<Aes256Gcm>::try_generate().map_err(|e| encode(e.to_string()))?;
        let sealed = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &plain,
                    aad: op_id.as_bytes(),
                },
            )
            .map_err(|_| encode("encryption failed".into()))?;
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(nonce.as_slice());
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Opens what [`SecretsKey::seal`] made for `op_id`. Errors: [`StoreError::Corrupt`] when it
    /// does not open (another key, another row, changed bytes) — the message names the key file.
    pub fn open(&self, op_id: &str, sealed: &[u8]) -> Result<SecretValues> {
        let corrupt = |reason: String| StoreError::Corrupt {
            table: "vnf_lcm_op_occ",
            row: op_id.to_owned(),
            column: "operation_secrets",
            reason,
        };
        if sealed.len() < NONCE_LEN {
            return Err(corrupt(format!("{} bytes, too short", sealed.len())));
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce =
            Nonce::<Aes256Gcm>::try_from(nonce).map_err(|_| corrupt("bad nonce length".into()))?;
        let plain = self
            .cipher
            .decrypt(
                &nonce,
                Payload {
                    msg: body,
                    aad: op_id.as_bytes(),
                },
            )
            .map_err(|_| {
                corrupt(format!(
                    "does not decrypt with the key {} (a different key, e.g. a backup restored without its key?)",
                    self.path.display()
                ))
            })?;
        serde_json::from_slice(&plain).map_err(|_| corrupt("not a JSON object of secrets".into()))
    }
}

/// At open, after the migrations: loads the key ([`key_path`] of the database's directory), or
/// creates it when none exists and no row holds encrypted secrets; then encrypts the secrets of
/// rows stored before secrets were encrypted (`operation_secrets = X''`, set by migration V5), in
/// one transaction. Errors: [`StoreError::SecretsKey`] when the key is missing although rows
/// hold encrypted secrets (restore it from backup), or unreadable; SQLite errors.
pub(super) fn at_open(conn: &mut rusqlite::Connection, db_path: &Path) -> Result<SecretsKey> {
    let dir = match db_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let path = key_path(dir);
    let key = if path.exists() {
        SecretsKey::load(&path)?
    } else {
        let sealed: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM vnf_lcm_op_occ WHERE length(operation_secrets) > 0)",
            [],
            |r| r.get(0),
        )?;
        if sealed {
            return Err(key_error(
                &path,
                "missing, but the database holds secrets encrypted with it; restore the key from \
                 the backup it was saved with (without it those requests cannot be run again)",
            ));
        }
        SecretsKey::create(&path)?
    };
    let tx = conn.transaction()?;
    let mut converted = 0;
    {
        let mut st = tx.prepare(
            "SELECT id, operation, operation_params FROM vnf_lcm_op_occ WHERE operation_secrets = X''",
        )?;
        let rows: Vec<(String, String, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut update = tx.prepare(
            "UPDATE vnf_lcm_op_occ SET operation_params = ?2, operation_secrets = ?3 WHERE id = ?1",
        )?;
        for (id, operation, params) in rows {
            let operation =
                LcmOperationType::parse(&operation).ok_or_else(|| StoreError::Corrupt {
                    table: "vnf_lcm_op_occ",
                    row: id.clone(),
                    column: "operation",
                    reason: "not an LCM operation type".into(),
                })?;
            let body = RequestBody::split(operation, &params);
            let sealed = body.secrets().map(|s| key.seal(&id, s)).transpose()?;
            if sealed.is_some() {
                converted += 1;
            }
            update.execute(rusqlite::params![id, body.stored(), sealed])?;
        }
    }
    let rekeyed = rekey_intake(&tx, &key)?;
    tx.commit()?;
    if converted > 0 {
        tracing::info!(
            operations = converted,
            "encrypted the secrets of requests stored before secrets were encrypted"
        );
    }
    if rekeyed > 0 {
        tracing::info!(
            rows = rekeyed,
            "replaced the plain SHA-256 digests of intake rows stored by an earlier version with keyed digests"
        );
    }
    Ok(key)
}

/// The request operation whose body `operation` stores.
fn request_kind(operation: LcmOperationType) -> LcmOperation {
    match operation {
        LcmOperationType::Instantiate => LcmOperation::Instantiate,
        LcmOperationType::Scale => LcmOperation::Scale,
        LcmOperationType::Heal => LcmOperation::Heal,
        LcmOperationType::Terminate => LcmOperation::Terminate,
        LcmOperationType::ChangeExtConn => LcmOperation::ChangeExtConn,
    }
}

/// A request body as the store keeps it: its JSON text with every secret replaced by `"***"`, and
/// the secrets taken out, which [`super::Tx::insert_operation`] seals under the operation's id.
/// Made before the write transaction (intake makes it on every core), so that the transaction
/// only writes.
#[derive(Debug, Clone)]
pub struct RequestBody {
    stored: String,
    secrets: Option<SecretValues>,
}

impl RequestBody {
    /// Splits `params`, the JSON text of a request body of `operation`, finding its secrets with
    /// the validator's walk ([`request_secret_pointers`]). A body without secrets, or that is not
    /// JSON, is stored as it is (the store does not validate; intake did).
    pub fn split(operation: LcmOperationType, params: &str) -> Self {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(params) else {
            return Self::plain(params.to_owned());
        };
        let pointers = request_secret_pointers(request_kind(operation), &doc);
        if pointers.is_empty() {
            return Self::plain(params.to_owned());
        }
        Self::redacted(&doc, &pointers)
    }

    /// `body` with the secrets at `pointers` (RFC 6901, relative to the body, as validation
    /// found them) taken out.
    pub fn redacted(body: &serde_json::Value, pointers: &[String]) -> Self {
        if pointers.is_empty() {
            return Self::plain(body.to_string());
        }
        let (redacted, secrets) = redact::redact(body, pointers);
        Self {
            stored: redacted.to_string(),
            secrets: Some(secrets),
        }
    }

    fn plain(stored: String) -> Self {
        Self {
            stored,
            secrets: None,
        }
    }

    /// The JSON text stored in `operation_params` (secrets replaced by `"***"`).
    pub fn stored(&self) -> &str {
        &self.stored
    }

    /// The secrets taken out, if any.
    pub(super) fn secrets(&self) -> Option<&SecretValues> {
        self.secrets.as_ref()
    }
}

/// `params` as stored with the secrets sealed in `sealed` put back. Errors:
/// [`StoreError::Corrupt`] (does not open, or does not fit the body), [`StoreError::SecretsKey`]
/// when there is no key to open them.
pub(super) fn join(
    key: Option<&SecretsKey>,
    op_id: &str,
    params: String,
    sealed: Option<Vec<u8>>,
) -> Result<String> {
    let Some(sealed) = sealed.filter(|s| !s.is_empty()) else {
        return Ok(params);
    };
    let key = key.ok_or_else(|| {
        StoreError::SecretsKey(format!(
            "operation {op_id} holds encrypted secrets but no key was loaded (only the daemon reads {KEY_FILE})"
        ))
    })?;
    let secrets = key.open(op_id, &sealed)?;
    let corrupt = |reason: String| StoreError::Corrupt {
        table: "vnf_lcm_op_occ",
        row: op_id.to_owned(),
        column: "operation_params",
        reason,
    };
    let mut doc: serde_json::Value =
        serde_json::from_str(&params).map_err(|_| corrupt("not JSON".into()))?;
    redact::restore(&mut doc, &secrets).map_err(|e| corrupt(e.to_string()))?;
    Ok(doc.to_string())
}

/// Replaces every plain digest in `intake.content_sha256` (rows of an earlier version) with
/// [`SecretsKey::rekey`]; returns how many. One scan of `intake`, at start only.
fn rekey_intake(tx: &rusqlite::Transaction<'_>, key: &SecretsKey) -> Result<usize> {
    let mut st = tx.prepare(
        "SELECT id, content_sha256 FROM intake WHERE substr(content_sha256, 1, 12) <> ?1",
    )?;
    let rows: Vec<(i64, String)> = st
        .query_map([DIGEST_PREFIX], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut update = tx.prepare("UPDATE intake SET content_sha256 = ?2 WHERE id = ?1")?;
    let mut n = 0;
    for (id, stored) in rows {
        if let Some(keyed) = key.rekey(&stored) {
            update.execute(rusqlite::params![id, keyed])?;
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewOperation, Store};
    use vnfkeeper_core::model::Timestamp;
    use vnfkeeper_core::model::{OpOccId, VnfInstanceId};

    const PARAMS: &str = r#"{"flavourId":"simple","vimConnectionInfo":[{"id":"v","vimType":"openstack","accessInfo":{"password":"hunter2"}}]}"#;

    /// A database of an earlier version (plaintext body, `operation_secrets = X''` as V5 leaves
    /// it) is converted at open; a database with sealed secrets and no key refuses to open.
    #[test]
    fn plaintext_rows_are_encrypted_at_open_and_a_missing_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let now = Timestamp(chrono::Utc::now());
        let mut store = Store::open(&db).unwrap();
        store
            .write(|tx| {
                tx.create_instance_if_missing(&VnfInstanceId::from("vnf-1"), now)?;
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from("op-1"),
                        vnf_instance_id: &VnfInstanceId::from("vnf-1"),
                        operation: LcmOperationType::Instantiate,
                        operation_params: &RequestBody::split(
                            LcmOperationType::Instantiate,
                            PARAMS,
                        ),
                        vnf_package: None,
                        request_id: None,
                        is_automatic_invocation: false,
                        status_detail: None,
                    },
                    now,
                )
            })
            .unwrap();
        let stored = |s: &Store| -> (String, Vec<u8>) {
            s.conn
                .query_row(
                    "SELECT operation_params, operation_secrets FROM vnf_lcm_op_occ WHERE id = 'op-1'",
                    [],
                    |r| Ok((r.get(0)?, r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default())),
                )
                .unwrap()
        };
        let (text, sealed) = stored(&store);
        assert!(!text.contains("hunter2") && !sealed.is_empty());
        // As an earlier version stored it.
        store
            .conn
            .execute(
                "UPDATE vnf_lcm_op_occ SET operation_params = ?1, operation_secrets = X''",
                [PARAMS],
            )
            .unwrap();
        drop(store);
        let store = Store::open(&db).unwrap();
        let (text, sealed) = stored(&store);
        assert!(!text.contains("hunter2") && text.contains("***"), "{text}");
        assert!(sealed.len() > NONCE_LEN);
        let (back, _) = store
            .reader()
            .operation_params(&OpOccId::from("op-1"))
            .unwrap()
            .unwrap();
        assert!(back.contains("hunter2"));
        // The read-only reader opens them too when it can read the key, and not without it.
        let ro = Store::open_read_only(&db).unwrap();
        let (back, _) = ro
            .queries()
            .operation_params(&OpOccId::from("op-1"))
            .unwrap()
            .unwrap();
        assert!(back.contains("hunter2"));
        drop((store, ro));
        std::fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        let ro = Store::open_read_only(&db).unwrap();
        let e = ro
            .queries()
            .operation_params(&OpOccId::from("op-1"))
            .unwrap_err();
        assert!(matches!(e, StoreError::SecretsKey(_)), "{e}");
        let e = Store::open(&db).unwrap_err();
        assert!(e.to_string().contains("restore the key"), "{e}");
        assert!(
            !dir.path().join(KEY_FILE).exists(),
            "no new key over sealed rows"
        );
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let key = SecretsKey::create(&path).unwrap();
        assert!(SecretsKey::create(&path).is_err(), "never overwrites");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let params = r#"{"flavourId":"simple","vimConnectionInfo":[{"id":"v","vimType":"openstack","accessInfo":{"password":"hunter2"}}]}"#;
        let body = RequestBody::split(LcmOperationType::Instantiate, params);
        let stored = body.stored().to_owned();
        assert!(!stored.contains("hunter2") && stored.contains("***"));
        let sealed = key.seal("op-1", body.secrets().unwrap()).unwrap();
        assert!(!String::from_utf8_lossy(&sealed).contains("hunter2"));
        let back = join(Some(&key), "op-1", stored.clone(), Some(sealed.clone())).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&back).unwrap(),
            serde_json::from_str::<serde_json::Value>(params).unwrap()
        );
        // Another row, another key, no key: errors that name no secret.
        let e = join(Some(&key), "op-2", stored.clone(), Some(sealed.clone())).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        let other = SecretsKey::create(&dir.path().join("other.key")).unwrap();
        let e = join(Some(&other), "op-1", stored.clone(), Some(sealed.clone())).unwrap_err();
        assert!(e.to_string().contains("other.key"), "{e}");
        let e = join(None, "op-1", stored, Some(sealed)).unwrap_err();
        assert!(matches!(e, StoreError::SecretsKey(_)), "{e}");
        assert!(SecretsKey::load(&path).is_ok());
        std::fs::write(dir.path().join("short.key"), b"xx").unwrap();
        assert!(SecretsKey::load(&dir.path().join("short.key")).is_err());
    }
}
