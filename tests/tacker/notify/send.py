"""Sends LCM notifications to a callback URI with Tacker's own code (PyPI tacker==16.0.0).

Driven by tests/tacker/tacker_notifications.rs with the venv of scripts/tacker-venv. Reads on stdin:

    {"callbackUri": URL, "userName": str, "password": str,
     "occurrences": [{"id", "vnfInstanceId", "operation", "operationState",
                      "isAutomaticInvocation"}],
     "instances": [{"id", "created": bool}]}

For the subscription it builds Tacker's LccnSubscriptionV2 with BASIC authentication, runs
subscription_utils.test_notification (Tacker's GET of the callback when a subscription is
created), then for each occurrence a VnfLcmOpOccV2 object, the notification body from
lcm_op_occ_utils.make_lcmocc_notif_data, and for each instance the identifier notification from
subscription_utils.make_{create,delete}_inst_notif_data, each sent with
subscription_utils.send_notification (which delivers on a thread per notification, so they
arrive in any order; the script waits for them). Prints one JSON line: {"tested": true, "sent": [ids]} —
or {"error": ...} when Tacker's test_notification raised.
"""

import json
import logging
import sys
import threading
import warnings

warnings.simplefilter("ignore")

from oslo_utils import timeutils  # noqa: E402
from tacker.sol_refactored.common import config  # noqa: E402,F401 (registers CONF.v2_vnfm)
from tacker.sol_refactored.common import lcm_op_occ_utils  # noqa: E402
from tacker.sol_refactored.common import subscription_utils  # noqa: E402
from tacker.sol_refactored import objects  # noqa: E402

objects.register_all()

ENDPOINT = "http://tacker.example:9890"


def main():
    # Tacker logs a failed delivery (and goes on): show it on stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    req = json.load(sys.stdin)
    subsc = objects.LccnSubscriptionV2(
        id="b6d2bd5a-40b3-4c47-a1b6-2e3c7e0f0a01",
        callbackUri=req["callbackUri"],
        verbosity="SHORT",
        authentication=objects.SubscriptionAuthentication(
            authType=["BASIC"],
            paramsBasic=objects.SubscriptionAuthentication_ParamsBasic(
                userName=req["userName"], password=req["password"]
            ),
        ),
    )
    try:
        subscription_utils.test_notification(subsc)
    except Exception as e:  # Tacker raises TestNotificationFailed
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return
    sent = []
    for o in req.get("occurrences", []):
        lcmocc = objects.VnfLcmOpOccV2(
            id=o["id"],
            operationState=o["operationState"],
            stateEnteredTime=timeutils.utcnow(),
            startTime=timeutils.utcnow(),
            vnfInstanceId=o["vnfInstanceId"],
            operation=o["operation"],
            isAutomaticInvocation=o["isAutomaticInvocation"],
            isCancelPending=False,
        )
        if o["operationState"] in ("FAILED_TEMP", "FAILED", "ROLLED_BACK"):
            lcmocc.error = objects.ProblemDetails(
                title="failed", status=500, detail="a step failed"
            )
        notif = lcm_op_occ_utils.make_lcmocc_notif_data(subsc, lcmocc, ENDPOINT)
        subscription_utils.send_notification(subsc, notif)
        sent.append(notif.id)
    for i in req.get("instances", []):
        inst = objects.VnfInstanceV2(id=i["id"])
        make = (
            subscription_utils.make_create_inst_notif_data
            if i["created"]
            else subscription_utils.make_delete_inst_notif_data
        )
        notif = make(subsc, inst, ENDPOINT)
        subscription_utils.send_notification(subsc, notif)
        sent.append(notif.id)
    # Tacker's send_notification runs each delivery on its own daemon thread (async_call): they
    # race one another, and the process must wait for them before it exits.
    for th in threading.enumerate():
        if th is not threading.current_thread():
            th.join(timeout=30)
    print(json.dumps({"tested": True, "sent": sent}))


main()
