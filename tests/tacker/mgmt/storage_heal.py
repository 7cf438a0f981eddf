"""Heals a VNF's storage server through Tacker's own sample KubernetesMgmtDriver.

Driven by tests/engine/engine_storage_heal_tacker.rs with the venv of scripts/tacker-venv
(PyPI tacker==16.0.0) and the sample driver of Tacker 16.0.0's sdist
(`samples/mgmt_driver/kubernetes/kubernetes_mgmt.py`, fetched by scripts/tacker-samples and
loaded from there, never copied). Reads on stdin:

    {"samples_dir", "package_dir", "clouds_yaml", "cloud": the VIM (its password stays in that
     file), "stack_id", "vnf_instance_id",
     "vnfd_id", "additional_params": the INSTANTIATE request's additionalParams,
     "vnfcs": [{"id", "vdu_id", "server_id", "cpd_ids": [..], "volumes": [Cinder volume ids]}],
     "heal": [vnfc ids]}

and runs, as Tacker's legacy VNF LCM conductor does for a HEAL of those VNFCs: the driver's
`heal_start`, the Heat heal of Tacker's OpenStack infra driver (the stack's status checked,
each healed VNFC's server — and its volumes, as Tacker's default `[vnf_lcm]
heal_vnfc_block_storage = true` does: Heat recreates them empty — marked unhealthy in the
(nested) stack that holds it, found by
Tacker's own `OpenStack._get_stack_resources`, the stack updated with `existing`, then waited
for by Tacker's own `OpenStack._wait_until_stack_ready` with Tacker's configured
`[openstack_vim] stack_retry_wait`), then the driver's `heal_end`. Prints one JSON object:
{"ok": true, "seconds": {"heal_start", "heat", "heal_end"}, "stack_retry_wait"} or
{"ok": false, "stage", "error"} (the exception Tacker raised, its type and text).

What Tacker reads from its database or its NFVO is answered from the input, at the seams
Tacker's driver calls: `vnflcm_utils._get_vim` (the VIM's access info),
`vnflcm_utils._get_vnf_package_path` (the unpacked package) and `NfvoPlugin` (not used by a
VNFC heal; its constructor needs Tacker's service configuration).
"""

# Tacker's services monkey-patch the standard library with eventlet before anything else
# (`tacker/cmd/eventlet/__init__.py`), and the driver's `_execute_command` patches again when it
# runs a command: patching only there, after paramiko's transport thread started as a native
# thread, leaves every command waiting until the driver's own timeout.
import eventlet

eventlet.monkey_patch()

import importlib.util  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
import warnings  # noqa: E402

import yaml  # noqa: E402

warnings.simplefilter("ignore")
# The driver's errors (a failed remote command's stderr) go to stderr, which the test shows
# when the heal fails.
logging.basicConfig(level=logging.ERROR, stream=sys.stderr)

from tacker import context as tacker_context  # noqa: E402
from tacker import objects  # noqa: E402
from tacker.vnflcm import utils as vnflcm_utils  # noqa: E402
from tacker.vnfm.infra_drivers.openstack import constants as infra_cnst  # noqa: E402
from tacker.vnfm.infra_drivers.openstack import heat_client as hc  # noqa: E402
from tacker.vnfm.infra_drivers.openstack import openstack  # noqa: E402
from tacker.extensions import vnfm  # noqa: E402

objects.register_all()


def load_driver(samples_dir):
    path = os.path.join(samples_dir, "samples/mgmt_driver/kubernetes/kubernetes_mgmt.py")
    spec = importlib.util.spec_from_file_location("kubernetes_mgmt", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tacker_uuid(vnf_instance_id):
    """Tacker's VnfInstance id is a UUID field; vnfkeeper's instance id need not be one: a
    name-based UUID (RFC 4122 version 5) of it stands in for Tacker's id."""
    try:
        return str(uuid.UUID(vnf_instance_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, "vnfkeeper:" + vnf_instance_id))


def vnf_instance(a, region):
    inst_id = tacker_uuid(a["vnf_instance_id"])
    res = []
    for v in a["vnfcs"]:
        res.append(objects.VnfcResourceInfo(
            id=v["id"],
            vdu_id=v["vdu_id"],
            compute_resource=objects.ResourceHandle(resource_id=v["server_id"]),
            vnfc_cp_info=[objects.VnfcCpInfo(id=f"{cp}-{v['id']}", cpd_id=cp)
                          for cp in v["cpd_ids"]],
            storage_resource_ids=[],
        ))
    info = objects.InstantiatedVnfInfo(
        flavour_id="simple",
        vnf_instance_id=inst_id,
        instance_id=a["stack_id"],
        vnfc_resource_info=res,
        virtual_storage_resource_info=[],
        additional_params=a["additional_params"],
    )
    return objects.VnfInstance(
        id=inst_id,
        vnfd_id=a["vnfd_id"],
        instantiated_vnf_info=info,
        vim_connection_info=[objects.VimConnectionInfo(
            id="vim-connection", vim_id="vim-testbed", vim_type="openstack",
            access_info={"region": region})],
    )


def heat_heal(access_info, stack_id, physical_ids):
    """Tacker's OpenStack infra driver's heal of VNFCs: mark unhealthy the resources whose
    physical ids are `physical_ids` (the servers and their volumes), update, wait."""
    infra = openstack.OpenStack()
    heat = hc.HeatClient(access_info, region_name=access_info.get("region"))
    status = heat.get(stack_id).stack_status
    if status not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        raise RuntimeError(f"stack {stack_id} is {status}")
    marked = 0
    for stack_uuid, resources in infra._get_stack_resources(stack_id, heat).items():
        for name, res in resources.items():
            if name != "child_stack" and res["physical_resource_id"] in physical_ids:
                heat.resource_mark_unhealthy(
                    stack_id=stack_uuid, resource_name=name, mark_unhealthy=True,
                    resource_status_reason="Healing")
                marked += 1
    if marked != len(physical_ids):
        raise RuntimeError(f"marked {marked} resources for {len(physical_ids)} servers and volumes")
    heat.heat.stacks.update(stack_id, existing=True)
    infra._wait_until_stack_ready(
        stack_id, access_info, infra_cnst.STACK_UPDATE_IN_PROGRESS,
        infra_cnst.STACK_UPDATE_COMPLETE, vnfm.VNFHealWaitFailed,
        region_name=access_info.get("region"))
    return infra.STACK_RETRY_WAIT


def main():
    a = json.load(sys.stdin)
    mod = load_driver(a["samples_dir"])
    with open(a["clouds_yaml"], encoding="utf-8") as f:
        cloud = yaml.safe_load(f)["clouds"][a["cloud"]]
    region = cloud["region_name"]
    access_info = dict(cloud["auth"], region=region, cert_verify="False")

    def get_vim(_context, _vim_connection_info):
        return {"id": "vim-testbed", "vim_id": "vim-testbed", "vim_type": "openstack",
                "access_info": access_info, "tenant_id": "", "extra": {}}

    vnflcm_utils._get_vim = get_vim
    vnflcm_utils._get_vnf_package_path = lambda _c, _vnfd_id: a["package_dir"]
    mod.NfvoPlugin = lambda: None

    driver = mod.KubernetesMgmtDriver()
    ctx = tacker_context.get_admin_context()
    inst = vnf_instance(a, region)
    req = objects.HealVnfRequest(vnfc_instance_id=a["heal"], additional_params={})
    healed = [v for v in a["vnfcs"] if v["id"] in a["heal"]]
    physical_ids = {v["server_id"] for v in healed} | {vol for v in healed for vol in v["volumes"]}
    seconds = {}
    stage = "heal_start"
    try:
        t = time.monotonic()
        driver.heal_start(ctx, inst, req, None, None)
        seconds["heal_start"] = time.monotonic() - t
        stage = "heat"
        t = time.monotonic()
        wait = heat_heal(access_info, a["stack_id"], physical_ids)
        seconds["heat"] = time.monotonic() - t
        stage = "heal_end"
        t = time.monotonic()
        driver.heal_end(ctx, inst, req, None, None)
        seconds["heal_end"] = time.monotonic() - t
    except Exception as e:  # reported, with the stage it happened in
        print(json.dumps({"ok": False, "stage": stage,
                          "error": f"{type(e).__name__}: {e}"}))
        return
    print(json.dumps({"ok": True, "seconds": seconds, "stack_retry_wait": wait}))


if __name__ == "__main__":
    main()
