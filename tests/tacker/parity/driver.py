"""Runs a sequence of LCM operations through Tacker's own StandardUserData code path.

Driven by tests/tacker/tacker_parity.rs with the venv of scripts/tacker-venv (PyPI tacker==16.0.0).
Reads a sequence on stdin:

    {"package": DIR, "steps": [{"name", "operation": "instantiate" | "scale-out" | "scale-in"
      | "heal" | "change-ext-conn" | "scale-out-rollback" | "lose", "request": SOL003 body
      (for "lose": {"vnfc": "<VDU>-<index>"}, a VNFC that disappears outside LCM),
      "zones"?: {"<VDU>-<k>": zone}, "images"?: {"<VDU or storage>": image}}]}

and prints one JSON object per step, in order: {"name", "template", "files", "nfv"}, the stack's
top-level template, nested templates (parsed) and `nfv` parameter after the step — or
{"name", "error"} when Tacker's code raised.

Per step, in Tacker's order: the GrantRequest from VnfLcmDriverV2.<op>_grant, a Grant answering
it (the step's zones, per COMPUTE addResource of each VDU in order, and images as vimAssets),
the fields from StandardUserData.<op> (scale_rollback for a rolled-back scale-out), merged onto
the stack by Openstack._update_fields (instantiate: the stack is created from them as they are). The instance after a step is rebuilt from the stack as
Openstack._make_instantiated_vnf_info would record it: vnfcResourceInfo sorted by index,
highest first, `metadata.vdu_idx`, `metadata.nfv` the stack's `nfv`.
"""

import copy
import json
import sys
import warnings

warnings.simplefilter("ignore")

from tacker.sol_refactored import objects  # noqa: E402
from tacker.sol_refactored.common import vnfd_utils  # noqa: E402
from tacker.sol_refactored.conductor import vnflcm_driver_v2  # noqa: E402
from tacker.sol_refactored.infra_drivers.openstack import openstack  # noqa: E402
from tacker.sol_refactored.infra_drivers.openstack import (  # noqa: E402
    userdata_standard,
)
import yaml  # noqa: E402

objects.register_all()

VNFD_ID = "vnfd-parity"
FLAVOUR = "simple"


class Stack:
    """The stack as Heat keeps it: what _update_fields reads back."""

    def __init__(self):
        self.template = {}
        self.nfv = {}
        self.files = {}

    def get_parameters(self, _name):
        return {"nfv": json.dumps(self.nfv)}

    def get_template(self, _name):
        return copy.deepcopy(self.template)


def vnfcs_of(template, vdus):
    """(vdu, index) of each `<VDU>-<index>` resource, highest index first."""
    out = []
    for name in template.get("resources", {}):
        vdu, _, idx = name.rpartition("-")
        if vdu in vdus and idx.isdigit():
            out.append((vdu, int(idx)))
    out.sort(key=lambda v: (v[0], -v[1]))
    return out


def instance(stack, vnfd, inst_req):
    """The VnfInstanceV2 dict after an operation, from the stack."""
    vdus = vnfd.get_vdu_nodes(FLAVOUR)
    storages = {}
    for name, node in vdus.items():
        storages[name] = vnfd.get_vdu_storages(node)
    res, info, strs = [], [], []
    for vdu, idx in vnfcs_of(stack.template, vdus):
        rid = f"{vdu}-{idx}"
        r = {
            "id": f"res-{rid}",
            "vduId": vdu,
            "computeResource": {"resourceId": f"server-{rid}"},
            "metadata": {"vdu_idx": idx},
        }
        cps = vnfd.get_vdu_cps(FLAVOUR, vdu)
        if cps:
            r["vnfcCpInfo"] = [
                {"id": f"{cp}-{rid}", "cpdId": cp, "vnfExtCpId": f"ext-{cp}-{rid}"}
                for cp in cps
            ]
        if storages[vdu]:
            r["storageResourceIds"] = [f"str-{s}-{rid}" for s in storages[vdu]]
            for s in storages[vdu]:
                strs.append({
                    "id": f"str-{s}-{rid}",
                    "virtualStorageDescId": s,
                    "storageResource": {"resourceId": f"volume-{s}-{rid}"},
                })
        res.append(r)
        info.append({"id": rid, "vduId": vdu, "vnfcResourceInfoId": r["id"],
                     "vnfcState": "STARTED"})
    inst_info = {
        "flavourId": FLAVOUR,
        "vnfState": "STARTED",
        "vnfcResourceInfo": res,
        "vnfcInfo": info,
        "metadata": {"nfv": copy.deepcopy(stack.nfv)},
    }
    if strs:
        inst_info["virtualStorageResourceInfo"] = strs
    links = inst_req.get("extVirtualLinks", [])
    if links:
        inst_info["extVirtualLinkInfo"] = [
            {"id": vl["id"], "resourceHandle": {"resourceId": vl["resourceId"]},
             "currentVnfExtCpData": vl["extCps"]}
            for vl in links
        ]
    mgd = inst_req.get("extManagedVirtualLinks", [])
    if mgd:
        inst_info["extManagedVirtualLinkInfo"] = [
            {"id": vl["id"], "vnfVirtualLinkDescId": vl["vnfVirtualLinkDescId"],
             "networkResource": {"resourceId": vl["resourceId"]}}
            for vl in mgd
        ]
    return {
        "id": "vnf-parity",
        "vnfdId": VNFD_ID,
        "instantiationState": "INSTANTIATED",
        "vimConnectionInfo": {},
        "instantiatedVnfInfo": inst_info,
    }


def grant_for(grant_req, step):
    """A Grant answering grant_req: zones per VNFC, images as vimAssets."""
    grant = {"id": "grant-parity", "vnfInstanceId": "vnf-parity",
             "vnfLcmOpOccId": "op-parity"}
    zones = step.get("zones", {})
    images = step.get("images", {})
    if zones:
        ids = {}
        grant["zones"] = []
        for z in sorted(set(zones.values())):
            ids[z] = f"zone-{len(ids)}"
            grant["zones"].append({"id": ids[z], "zoneId": z})
        # Which <VDU>-<k> each COMPUTE addResource becomes: Tacker numbers them in list order,
        # after the VNFCs the VDU has (instantiate: from 0).
        start = step.get("_start", {})
        seen = {}
        adds = []
        for res in grant_req.get("addResources", []):
            if res["type"] != "COMPUTE":
                continue
            vdu = res["resourceTemplateId"]
            k = start.get(vdu, 0) + seen.get(vdu, 0)
            seen[vdu] = seen.get(vdu, 0) + 1
            a = {"resourceDefinitionId": res["id"]}
            if f"{vdu}-{k}" in zones:
                a["zoneId"] = ids[zones[f"{vdu}-{k}"]]
            adds.append(a)
        grant["addResources"] = adds
    if images:
        grant["vimAssets"] = {"softwareImages": [
            {"id": f"img-{n}", "vnfdSoftwareImageId": n, "vimSoftwareImageId": i}
            for n, i in images.items()
        ]}
    return grant


def run(seq):
    package = seq["package"]
    vnfd = vnfd_utils.Vnfd(VNFD_ID)
    vnfd.init_from_csar_dir(package)
    lcm = vnflcm_driver_v2.VnfLcmDriverV2.__new__(vnflcm_driver_v2.VnfLcmDriverV2)
    infra = openstack.Openstack()
    stack = Stack()
    inst_req = {}
    out = []
    for step in seq["steps"]:
        op = step["operation"]
        body = step["request"]
        if op == "lose":
            # A VNFC lost outside LCM (its resource gone from the stack, its record with it):
            # how a gap in the indices arises.
            stack.template["resources"].pop(body["vnfc"])
            out.append(copy.deepcopy({"name": step["name"], "template": stack.template,
                                      "files": stack.files, "nfv": stack.nfv}))
            continue
        inst = instance(stack, vnfd, inst_req)
        inst_obj = objects.VnfInstanceV2.from_dict(copy.deepcopy(inst))
        try:
            if op == "instantiate":
                req = objects.InstantiateVnfRequest.from_dict(copy.deepcopy(body))
                grant_req = objects.GrantRequestV1(operation="INSTANTIATE")
                lcm.instantiate_grant(grant_req, req, inst_obj, vnfd)
                method = userdata_standard.StandardUserData.instantiate
            elif op in ("scale-out", "scale-in", "scale-out-rollback"):
                req = objects.ScaleVnfRequest.from_dict(copy.deepcopy(body))
                grant_req = objects.GrantRequestV1(operation="SCALE")
                lcm.scale_grant(grant_req, req, inst_obj, vnfd)
                method = (userdata_standard.StandardUserData.scale_rollback
                          if op == "scale-out-rollback"
                          else userdata_standard.StandardUserData.scale)
            elif op == "heal":
                req = objects.HealVnfRequest.from_dict(copy.deepcopy(body))
                grant_req = objects.GrantRequestV1(operation="HEAL")
                lcm.heal_grant(grant_req, req, inst_obj, vnfd)
                method = userdata_standard.StandardUserData.heal
            elif op == "change-ext-conn":
                req = objects.ChangeExtVnfConnectivityRequest.from_dict(
                    copy.deepcopy(body))
                grant_req = objects.GrantRequestV1(operation="CHANGE_EXT_CONN")
                lcm.change_ext_conn_grant(grant_req, req, inst_obj, vnfd)
                method = userdata_standard.StandardUserData.change_ext_conn
            else:
                raise ValueError(f"unknown operation {op}")
            gr = grant_req.to_dict()
            start = {}
            if op in ("scale-out", "scale-out-rollback"):
                for vdu in vnfd.get_vdu_nodes(FLAVOUR):
                    start[vdu] = sum(1 for r in inst["instantiatedVnfInfo"]["vnfcResourceInfo"]
                                     if r["vduId"] == vdu)
            grant = grant_for(gr, dict(step, _start=start))
            # The subprocess of Openstack._make_hot gets plain dicts (to_dict()).
            if op == "scale-out-rollback":
                # The failed scale-out's HOT reached the stack; the instance record did not
                # change, so scale_rollback sees the VNFC count before it.
                sd = userdata_standard.StandardUserData
                added = sd.scale(req.to_dict(), copy.deepcopy(inst), gr, grant, package)
                added = infra._update_fields(stack, "stack", added)
                stack.template = yaml.safe_load(added["template"])
                stack.nfv = added["parameters"]["nfv"]
            fields = method(req.to_dict(), inst, gr, grant, package)
            if op != "instantiate":
                # Openstack.instantiate sends the fields to create_stack as they are; the other
                # operations merge them onto the stack first.
                fields = infra._update_fields(stack, "stack", fields)
        except Exception as e:  # reported as the step's result
            out.append({"name": step["name"], "error": f"{type(e).__name__}: {e}"})
            continue
        if "template" in fields:
            stack.template = yaml.safe_load(fields["template"])
        if "nfv" in fields.get("parameters", {}):
            stack.nfv = fields["parameters"]["nfv"]
        if "files" in fields:
            stack.files = {k: yaml.safe_load(v) for k, v in fields["files"].items()}
        if op == "instantiate":
            inst_req = body
        out.append(copy.deepcopy({"name": step["name"], "template": stack.template,
                                  "files": stack.files, "nfv": stack.nfv}))
    return out


if __name__ == "__main__":
    # YAML reads heat_template_version as a date; Heat reads it as the string.
    json.dump(run(json.load(sys.stdin)), sys.stdout, default=str)
