# vnfkeeper's MgmtDriver script for OpenStack Tacker v2 (the `Vnflcm` interface of a VNF
# package's VNFD, SOL001 v2.6.1 `tosca.interfaces.nfv.Vnflcm`; artifact type
# `tosca.artifacts.Implementation.Python`).
#
# Tacker's conductor runs this file as `python3 <file>` for each hook the VNFD names
# (heal_start, heal_end, scale_start, scale_end) with a pickled dict on stdin: `operation`
# (the hook), `request` (the operation's request), `vnf_instance`, `grant_request`,
# `grant_response`, `tmp_csar_dir`. A non-zero exit fails Tacker's operation with this
# script's standard error as the reason; standard output is left empty (Tacker reads it as a
# pickled answer and ignores an empty one).
#
# The script sends the hook to vnfkeeper (`tacker.hook_path` on `tacker.listen`) and waits,
# bounded, until vnfkeeper's operation for it has ended: exit 0 when it COMPLETED (or vnfkeeper
# has nothing to run), else vnfkeeper's reason on standard error and exit 1 — e.g. a
# storage-server heal_start refused while a PersistentVolume is Bound, before Tacker touches
# anything.
#
# Settings (never on the command line): the INI file named by $VNFKEEPER_MGMT_DRIVER_CONFIG,
# else /etc/vnfkeeper/tacker-mgmt-driver.conf, section [vnfkeeper]:
#   url            = http://192.0.2.10:9890/vnfkeeper/mgmt-hooks   (tacker.listen + hook_path)
#   auth_type      = BASIC | OAUTH2_CLIENT_CREDENTIALS              (as tacker.auth_type)
#   username       = tacker                                         (or the OAuth 2.0 client id)
#   password_file  = /etc/vnfkeeper/tacker-mgmt-driver.password     (first line)
#   token_url      = http://192.0.2.10:9890/vnfkeeper/token          (OAuth 2.0 only)
#   ca_file        = /etc/vnfkeeper/ca.pem                           (https: the CA to trust)
#   timeout_secs   = 3600     (longest wait for vnfkeeper's operation)
#   poll_secs      = 2        (between two looks at its outcome)
# Python 3 standard library only: it runs inside Tacker's conductor environment.

import base64
import configparser
import json
import os
import pickle
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HOOKS = ("heal_start", "heal_end", "scale_start", "scale_end")
DEFAULT_CONFIG = "/etc/vnfkeeper/tacker-mgmt-driver.conf"
REQUEST_TIMEOUT = 30
MAX_ANSWER_BYTES = 1 << 20


class Refused(Exception):
    """vnfkeeper refused or failed the hook; the message is its reason."""


def fail(message):
    sys.stderr.write("vnfkeeper: %s\n" % message)
    sys.stderr.flush()
    sys.exit(1)


def settings():
    path = os.environ.get("VNFKEEPER_MGMT_DRIVER_CONFIG", DEFAULT_CONFIG)
    cp = configparser.ConfigParser(interpolation=None)
    if not cp.read(path):
        fail("cannot read the settings file %s" % path)
    if not cp.has_section("vnfkeeper"):
        fail("%s has no [vnfkeeper] section" % path)
    s = cp["vnfkeeper"]
    out = {
        "url": s.get("url", ""),
        "auth_type": s.get("auth_type", "BASIC").upper(),
        "username": s.get("username", ""),
        "password_file": s.get("password_file", ""),
        "token_url": s.get("token_url", ""),
        "ca_file": s.get("ca_file", ""),
    }
    try:
        out["timeout"] = float(s.get("timeout_secs", "3600"))
        out["poll"] = float(s.get("poll_secs", "2"))
    except ValueError:
        fail("%s: timeout_secs and poll_secs must be numbers" % path)
    if urllib.parse.urlsplit(out["url"]).scheme not in ("http", "https"):
        fail("%s: url must be an http:// or https:// URL" % path)
    if out["auth_type"] not in ("BASIC", "OAUTH2_CLIENT_CREDENTIALS"):
        fail("%s: auth_type must be BASIC or OAUTH2_CLIENT_CREDENTIALS" % path)
    if not out["username"] or not out["password_file"]:
        fail("%s: username and password_file are required" % path)
    try:
        with open(out["password_file"], encoding="utf-8") as f:
            out["password"] = f.readline().rstrip("\r\n")
    except OSError as e:
        fail("cannot read password_file: %s" % e.strerror)
    if not out["password"]:
        fail("password_file: the first line (the password) is empty")
    return out


def tls_context(s):
    if not s["ca_file"]:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=s["ca_file"])


def call(s, method, url, body=None, headers=None):
    """(status, parsed JSON or {}) of one request; network errors raise OSError."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    ctx = tls_context(s) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT, context=ctx) as r:
            status, raw = r.status, r.read(MAX_ANSWER_BYTES)
            location = r.headers.get("Location")
    except urllib.error.HTTPError as e:
        status, raw, location = e.code, e.read(MAX_ANSWER_BYTES), None
    try:
        answer = json.loads(raw.decode("utf-8")) if raw else {}
    except (ValueError, UnicodeDecodeError):
        answer = {}
    if not isinstance(answer, dict):
        answer = {}
    return status, answer, location


def authorization(s):
    if s["auth_type"] == "BASIC":
        pair = "%s:%s" % (s["username"], s["password"])
        return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    # OAuth 2.0 client credentials (RFC 6749 section 4.4), as Tacker itself asks vnfkeeper's
    # token endpoint before each notification.
    pair = "%s:%s" % (
        urllib.parse.quote(s["username"], safe=""),
        urllib.parse.quote(s["password"], safe=""),
    )
    status, answer, _ = call(
        s,
        "POST",
        s["token_url"],
        body=b"grant_type=client_credentials",
        headers={
            "Authorization": "Basic "
            + base64.b64encode(pair.encode("utf-8")).decode("ascii"),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    token = answer.get("access_token")
    if status != 200 or not isinstance(token, str):
        fail("the token endpoint refused the client credentials (HTTP %d)" % status)
    return "Bearer " + token


def reason(status, answer):
    detail = answer.get("detail")
    if isinstance(detail, str) and detail:
        return detail
    return "HTTP %d" % status


def hook_body(d):
    operation = d.get("operation")
    if operation not in HOOKS:
        fail(
            "vnfkeeper does not run %r: name this script only for %s in the VNFD's Vnflcm interface"
            % (operation, ", ".join(HOOKS))
        )
    inst = d.get("vnf_instance") or {}
    grant = d.get("grant_request") or {}
    occ = grant.get("vnfLcmOpOccId")
    if not inst.get("id") or not occ:
        fail("Tacker's dict has no vnf_instance.id or grant_request.vnfLcmOpOccId")
    removed = []
    for r in grant.get("removeResources") or []:
        rid = (r.get("resource") or {}).get("resourceId") if isinstance(r, dict) else None
        if rid:
            removed.append(rid)
    body = {
        "hook": operation,
        "vnfInstanceId": inst["id"],
        "vnfLcmOpOccId": occ,
        "request": d.get("request") or {},
    }
    if removed:
        body["removeResources"] = removed
    return operation, body


def run(d, s):
    operation, body = hook_body(d)
    deadline = time.monotonic() + s["timeout"]
    headers = {
        "Authorization": authorization(s),
        "Content-Type": "application/json",
        "Accept": "application/json",
    }
    status, answer, location = call(
        s, "POST", s["url"], json.dumps(body).encode("utf-8"), headers
    )
    while True:
        if status == 200:
            detail = answer.get("detail")
            if isinstance(detail, str) and detail:
                sys.stderr.write("vnfkeeper: %s: %s\n" % (operation, detail))
            return
        if status != 202:
            raise Refused(reason(status, answer))
        op = answer.get("operationId")
        if not isinstance(op, str) or not op:
            raise Refused("vnfkeeper's answer names no operation")
        if time.monotonic() >= deadline:
            raise Refused(
                "vnfkeeper's operation %s for %s did not end within %d s (it goes on; see `vnfkeeper ops show %s`)"
                % (op, operation, s["timeout"], op)
            )
        time.sleep(s["poll"])
        url = s["url"].rstrip("/") + "/" + urllib.parse.quote(op, safe="")
        if s["auth_type"] != "BASIC":
            headers["Authorization"] = authorization(s)
        try:
            status, answer, _ = call(s, "GET", url, headers=headers)
        except OSError:
            # vnfkeeper restarting: its operation resumes; look again until the deadline.
            status = 202
        if status == 202 and "operationId" not in answer:
            answer = dict(answer, operationId=op)


def main():
    try:
        d = pickle.load(sys.stdin.buffer)
    except Exception as e:  # noqa: BLE001 - any unreadable input is the same failure
        fail("cannot read Tacker's pickled dict on stdin: %s" % type(e).__name__)
    if not isinstance(d, dict):
        fail("Tacker's input is not a dict")
    s = settings()
    try:
        run(d, s)
    except Refused as e:
        fail("%s refused: %s" % (d.get("operation"), e))
    except OSError as e:
        fail("cannot reach vnfkeeper at %s: %s" % (s["url"], e))


if __name__ == "__main__":
    main()
