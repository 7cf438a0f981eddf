"""Sends LCM notifications with Tacker's own code (PyPI tacker==16.0.0) while a shard fails over.

Driven by scripts/demo-failover with the venv of scripts/tacker-venv; the host plays Tacker's
machine and the callback URI is on the shard's floating address. Usage:

    python during_failover.py CALLBACK_URI USER PASSWORD_FILE RETRIES STOP_FILE OUT_FILE TAG

Every 0.25 s, until STOP_FILE exists, it builds a VnfLcmOperationOccurrenceNotification as
Tacker's conductor does (lcm_op_occ_utils.make_lcmocc_notif_data for a new operation
occurrence, PROCESSING, so no two share a vnfLcmOpOccId and operationState) and hands it to
subscription_utils.send_notification, which delivers it on a thread of its own with HTTP Basic
(the subscription's paramsBasic) and `Version: 2.0.0`, expects 204, and only logs a failure.
RETRIES is Tacker's `[v2_vnfm] notify_connect_retries` (its default 0: no retry; N: N retries of
a connection failure, keystoneauth's delays 0.5 s doubling up to 60 s). Tacker's code is run
unchanged; HttpClient.do_request is wrapped only to observe each notification's outcome.

Then it waits for the delivery threads (at most 180 s) and writes OUT_FILE, one line per
notification: `TAG<TAB>id<TAB>outcome` where outcome is `204`, another HTTP status, the name of
the exception Tacker got (connection refused, no route, reset, ...), or `pending` for a delivery
still running after the wait. The password is read from PASSWORD_FILE, never from argv.
"""

import logging
import os
import sys
import threading
import time
import uuid
import warnings

warnings.simplefilter("ignore")

from oslo_config import cfg  # noqa: E402
from oslo_utils import timeutils  # noqa: E402
from tacker.sol_refactored.common import config  # noqa: E402,F401 (registers CONF.v2_vnfm)
from tacker.sol_refactored.common import http_client  # noqa: E402
from tacker.sol_refactored.common import lcm_op_occ_utils  # noqa: E402
from tacker.sol_refactored.common import subscription_utils  # noqa: E402
from tacker.sol_refactored import objects  # noqa: E402

objects.register_all()

ENDPOINT = "http://tacker.example:9890"
PERIOD = 0.25
WAIT = 180


def main():
    callback, user, password_file, retries, stop_file, out_file, tag = sys.argv[1:8]
    with open(password_file) as f:
        password = f.readline().rstrip("\n")
    # Tacker logs a failed delivery and goes on; the outcomes are counted instead.
    logging.basicConfig(level=logging.CRITICAL)
    cfg.CONF([], project="tacker")
    cfg.CONF.set_override("notify_connect_retries", int(retries), group="v2_vnfm")

    outcomes = {}
    lock = threading.Lock()
    do_request = http_client.HttpClient.do_request

    def observed(self, url, method, *args, **kwargs):
        body = kwargs.get("body")
        nid = getattr(body, "id", None)
        try:
            resp, resp_body = do_request(self, url, method, *args, **kwargs)
        except Exception as e:
            status = getattr(e, "status", None) or getattr(e, "code", None)
            with lock:
                outcomes[nid] = str(status) if isinstance(status, int) else type(e).__name__
            raise
        with lock:
            outcomes[nid] = str(resp.status_code)
        return resp, resp_body

    http_client.HttpClient.do_request = observed

    subsc = objects.LccnSubscriptionV2(
        id=str(uuid.uuid4()),
        callbackUri=callback,
        verbosity="SHORT",
        authentication=objects.SubscriptionAuthentication(
            authType=["BASIC"],
            paramsBasic=objects.SubscriptionAuthentication_ParamsBasic(
                userName=user, password=password
            ),
        ),
    )
    sent = []
    instance = str(uuid.uuid4())
    while not os.path.exists(stop_file):
        lcmocc = objects.VnfLcmOpOccV2(
            id=str(uuid.uuid4()),
            operationState="PROCESSING",
            stateEnteredTime=timeutils.utcnow(),
            startTime=timeutils.utcnow(),
            vnfInstanceId=instance,
            operation="HEAL",
            isAutomaticInvocation=True,
            isCancelPending=False,
        )
        notif = lcm_op_occ_utils.make_lcmocc_notif_data(subsc, lcmocc, ENDPOINT)
        sent.append(notif.id)
        subscription_utils.send_notification(subsc, notif)
        time.sleep(PERIOD)
    deadline = time.monotonic() + WAIT
    for th in threading.enumerate():
        if th is not threading.current_thread():
            th.join(timeout=max(0.0, deadline - time.monotonic()))
    with lock:
        lines = [f"{tag}\t{n}\t{outcomes.get(n, 'pending')}\n" for n in sent]
    with open(out_file + ".tmp", "w") as f:
        f.writelines(lines)
    os.rename(out_file + ".tmp", out_file)


main()
