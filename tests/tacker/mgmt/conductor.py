"""Runs one LCM hook the way Tacker v2's conductor runs a VNF package's MgmtDriver script.

Driven by the testbed's Tacker stand-in (tests/testbed/src/cloud/tacker.rs, `MgmtDriverRun`)
with the venv of scripts/tacker-venv (PyPI tacker==16.0.0). Reads on stdin:

    {"csar_dir": DIR, "flavour_id", "hook": "heal_start" | …, "operation": "HEAL" | …,
     "vnf_instance_id", "vnfd_id", "vnf_lcm_op_occ_id", "request": the operation's request}

and calls Tacker's own VnfLcmDriverV2._exec_mgmt_driver_script with Tacker's own objects: a
Vnfd loaded from DIR (whose Vnflcm interface names the script, or not), the request object of
the operation, the VNF instance, the GrantRequest and Grant. Prints one JSON object: {"ran":
bool} when it returned (ran: the VNFD names a script for the hook), or {"status", "title",
"detail"} of the exception Tacker raised (MgmtDriverExecutionFailed: what Tacker records as the
op occ's error).
"""

import json
import sys
import uuid
import warnings

warnings.simplefilter("ignore")

from tacker.sol_refactored import objects  # noqa: E402
from tacker.sol_refactored.common import exceptions as sol_ex  # noqa: E402
from tacker.sol_refactored.common import vnfd_utils  # noqa: E402
from tacker.sol_refactored.conductor import vnflcm_driver_v2  # noqa: E402

objects.register_all()

REQUESTS = {
    "HEAL": objects.HealVnfRequest,
    "SCALE": objects.ScaleVnfRequest,
    "INSTANTIATE": objects.InstantiateVnfRequest,
    "TERMINATE": objects.TerminateVnfRequest,
}


def main():
    a = json.load(sys.stdin)
    vnfd = vnfd_utils.Vnfd(a["vnfd_id"])
    vnfd.init_from_csar_dir(a["csar_dir"])
    if vnfd.get_interface_script(a["flavour_id"], a["hook"]) is None:
        # _exec_mgmt_driver_script returns here too, before it reads anything else.
        print(json.dumps({"ran": False}))
        return
    req = REQUESTS[a["operation"]].from_dict(a["request"])
    inst = objects.VnfInstanceV2(
        id=a["vnf_instance_id"],
        vnfdId=a["vnfd_id"],
        vnfProvider="provider",
        vnfProductName="product",
        vnfSoftwareVersion="1.0",
        vnfdVersion="1.0",
        instantiationState="INSTANTIATED",
    )
    grant_req = objects.GrantRequestV1(
        vnfInstanceId=a["vnf_instance_id"],
        vnfLcmOpOccId=a["vnf_lcm_op_occ_id"],
        vnfdId=a["vnfd_id"],
        operation=a["operation"],
        isAutomaticInvocation=False,
    )
    grant = objects.GrantV1(
        id=str(uuid.uuid4()),
        vnfInstanceId=a["vnf_instance_id"],
        vnfLcmOpOccId=a["vnf_lcm_op_occ_id"],
    )
    driver = vnflcm_driver_v2.VnfLcmDriverV2()
    try:
        driver._exec_mgmt_driver_script(
            a["hook"], a["flavour_id"], req, inst, grant_req, grant, vnfd, {}
        )
    except sol_ex.SolException as e:
        print(json.dumps({"status": e.status, "title": e.title, "detail": e.detail}))
        return
    print(json.dumps({"ran": True}))


if __name__ == "__main__":
    main()
