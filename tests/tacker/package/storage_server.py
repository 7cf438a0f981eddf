#!/usr/bin/env python3
"""Adds the NFS storage server of Tacker's PV guide to a copy of Tacker 16.0.0's
sol_v2_kubernetes_vnf_package (its `contents/` directory), for `scripts/tacker-sample-package
--storage-server`.

The guide (doc/source/user/mgmt_driver_deploy_k8s_pv_usage_guide.rst in the tacker sdist) tells
an operator to add to the VNFD a `storage_server` Vdu.Compute that requires a
`storage_server_volume` Vdu.VirtualBlockStorage, a `storage_server_CP` VduCp bound to it, the
matching BaseHOT resources (OS::Nova::Server with the volume in block_device_mapping_v2,
OS::Cinder::Volume, OS::Neutron::Port) and the PersistentVolume manifests
Files/kubernetes/nfs-pv1.yaml and nfs-pv2.yaml. The guide's sample is a v1 package (flat
BaseHOT); this v2 package keeps each VDU in a nested template whose top-level resource takes
`computeFlavourId`, `vcImageId` and the CP's `network` from the `nfv` parameter, and gives every
node a floating IP: the storage server gets the same shape. Tacker v2 creates as many instances
of a VDU as its VduInstantiationLevels name for the instantiation level, so the storage server
gets a VduInitialDelta and VduInstantiationLevels of 1 in both levels of the flavour.

Only the flavour `simple` (the one `scripts/demo tacker` instantiates) is changed. The edit is
by text, at anchors of the sample's files; each anchor must be there exactly once, and the
result is read back as YAML and checked, so a change of Tacker's sample fails here loudly.
"""
import pathlib
import re
import sys

import yaml

DF = "Definitions/sample_kubernetes_df_simple.yaml"
TOP = "BaseHOT/simple/simple_hot_top.yaml"
NESTED = "BaseHOT/simple/nested/simple_nested_storage.yaml"


def fail(msg):
    sys.exit(f"tacker-sample-package --storage-server: {msg}; Tacker's sample changed shape")


def insert_once(text, anchor, new, where, what):
    """`new` before or after the one occurrence of `anchor` in `text`."""
    if text.count(anchor) != 1:
        fail(f"{what}: {anchor.strip()!r} occurs {text.count(anchor)} times, not once")
    i = text.index(anchor)
    return text[:i] + new + text[i:] if where == "before" else \
        text[:i + len(anchor)] + new + text[i + len(anchor):]


VDU = """
    storage_server:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: storage_server
        description: storage server compute node
        vdu_profile:
          min_number_of_instances: 1
          max_number_of_instances: 1
        sw_image_data:
          name: storage_server-image
          version: '22.04'
          checksum:
            algorithm: sha-512
            hash: {hash}
          container_format: bare
          disk_format: qcow2
          min_disk: 0 GB
          size: 2 GB
      artifacts:
        sw_image:
          type: tosca.artifacts.nfv.SwImage
          file: {image}
      capabilities:
        virtual_compute:
          properties:
            requested_additional_capabilities:
              properties:
                requested_additional_capability_name: m1.medium
                support_mandatory: true
                target_performance_parameters:
                  entry_schema: test
            virtual_memory:
              virtual_mem_size: 4 GB
            virtual_cpu:
              num_virtual_cpu: 2
            virtual_local_storage:
              - size_of_storage: 45 GB
      requirements:
        - virtual_storage: storage_server_volume

    storage_server_volume:
      type: tosca.nodes.nfv.Vdu.VirtualBlockStorage
      properties:
        virtual_block_storage_data:
          size_of_storage: 1 GB

    storage_server_CP:
      type: tosca.nodes.nfv.VduCp
      properties:
        layer_protocols: [ ipv4 ]
        order: 0
      requirements:
        - virtual_binding: storage_server
"""

POLICIES = """
    - storage_server_initial_delta:
        type: tosca.policies.nfv.VduInitialDelta
        properties:
          initial_delta:
            number_of_instances: 1
        targets: [ storage_server ]

    - storage_server_instantiation_levels:
        type: tosca.policies.nfv.VduInstantiationLevels
        properties:
          levels:
            instantiation_level_1:
              number_of_instances: 1
            instantiation_level_2:
              number_of_instances: 1
        targets: [ storage_server ]
"""

TOP_RESOURCE = """
  storage_server:
    type: simple_nested_storage.yaml
    properties:
      flavor: { get_param: [ nfv, VDU, storage_server, computeFlavourId ] }
      image: { get_param: [ nfv, VDU, storage_server, vcImageId ] }
      net1: { get_param: [ nfv, CP, storage_server_CP, network ] }
"""

NESTED_HOT = """heat_template_version: 2013-05-23
description: 'storage_server HOT for Sample VNF (vnfkeeper: the NFS storage server of the PV guide)'

parameters:
  flavor:
    type: string
  image:
    type: string
  net1:
    type: string

resources:
  storage_server:
    type: OS::Nova::Server
    properties:
      flavor: { get_param: flavor }
      name: storage_server
      image: { get_param: image }
      block_device_mapping_v2:
      - device_name: vdb
        volume_id: { get_resource: storage_server_volume }
        boot_index: -1
      networks:
      - port:
          get_resource: storage_server_CP

  storage_server_volume:
    type: OS::Cinder::Volume
    properties:
      name: storage_server_volume
      size: 1

  storage_server_CP:
    type: OS::Neutron::Port
    properties:
      network: { get_param: net1 }

  storage_server_CP_floating_ip:
    type: OS::Neutron::FloatingIP
    properties:
      floating_network: public
      port_id: { get_resource: storage_server_CP }
"""

PV = """apiVersion: v1
kind: PersistentVolume
metadata:
  name: nfs-pv{n}
spec:
  capacity:
    storage: {n}Gi
  persistentVolumeReclaimPolicy: Retain
  accessModes:
    - ReadWriteOnce
  nfs:
    server: 0.0.0.0
    path: "/volume/nfs/pv{n}"
"""


def main():
    root = pathlib.Path(sys.argv[1])
    df = root / DF
    text = df.read_text()
    master = re.search(r"\n    masterNode:\n      type: tosca\.nodes\.nfv\.Vdu\.Compute\n(.*?)\n    workerNode:",
                       text, re.S)
    if not master:
        fail(f"{DF}: no masterNode Vdu.Compute before workerNode")
    digest = re.findall(r"hash: ([0-9a-f]{128})\n", master.group(1))
    image = re.findall(r"file: (\.\./Files/images/[^\n]+)\n", master.group(1))
    if len(digest) != 1 or len(image) != 1:
        fail(f"{DF}: masterNode has not exactly one image hash and one image file")
    text = insert_once(text, "\n  policies:\n", VDU.format(hash=digest[0], image=image[0]),
                       "before", DF)
    text = insert_once(text, "      virtual_link_external1_2: [ workerNode_CP1, virtual_link ]\n",
                       "      virtual_link_external1_3: [ storage_server_CP, virtual_link ]\n",
                       "after", DF)
    if not text.endswith("        targets: [ workerNode ]\n"):
        fail(f"{DF}: does not end with the workerNode policy")
    text += POLICIES
    df.write_text(text)

    top = root / TOP
    hot = top.read_text()
    hot = insert_once(hot, "\noutputs: {}\n", TOP_RESOURCE, "before", TOP)
    top.write_text(hot)
    nested = root / NESTED
    if nested.exists():
        fail(f"{NESTED} exists already")
    nested.write_text(NESTED_HOT)
    pvs = root / "Files/kubernetes"
    pvs.mkdir(parents=True, exist_ok=False)
    for n in (1, 2):
        (pvs / f"nfs-pv{n}.yaml").write_text(PV.format(n=n))

    # Read back what Tacker will read.
    d = yaml.safe_load(df.read_text())["topology_template"]
    nodes = d["node_templates"]
    want = {"storage_server": "tosca.nodes.nfv.Vdu.Compute",
            "storage_server_volume": "tosca.nodes.nfv.Vdu.VirtualBlockStorage",
            "storage_server_CP": "tosca.nodes.nfv.VduCp"}
    for name, kind in want.items():
        if nodes.get(name, {}).get("type") != kind:
            fail(f"{DF}: {name} is not a {kind} after the edit")
    if nodes["storage_server"]["properties"]["sw_image_data"] != \
            dict(nodes["masterNode"]["properties"]["sw_image_data"], name="storage_server-image"):
        fail(f"{DF}: storage_server's image is not masterNode's")
    levels = [p for pol in d["policies"] for p in pol.values()
              if p["type"] == "tosca.policies.nfv.VduInstantiationLevels"
              and "storage_server" in p.get("targets", [])]
    if len(levels) != 1:
        fail(f"{DF}: not one VduInstantiationLevels policy of storage_server")
    t = yaml.safe_load(top.read_text())["resources"]
    if t.get("storage_server", {}).get("type") != "simple_nested_storage.yaml" or \
            set(t) != {"masterNode", "workerNode", "storage_server"}:
        fail(f"{TOP}: resources {sorted(t)} after the edit")
    n = yaml.safe_load(nested.read_text())["resources"]
    if sorted(n) != sorted(["storage_server", "storage_server_volume", "storage_server_CP",
                            "storage_server_CP_floating_ip"]):
        fail(f"{NESTED}: resources {sorted(n)}")


main()
