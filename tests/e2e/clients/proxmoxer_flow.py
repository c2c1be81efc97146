"""A VM's life driven through proxmoxer (a real PVE client) against `proxops sim serve`.

Usage: proxmoxer_flow.py HOST PORT TOKEN_NAME TOKEN_VALUE. Exits 0 when every step answered as
PVE does; any other answer raises. The e2e test (tests/e2e/clients.rs) then checks the
simulator's state.
"""

import sys

import urllib3
from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException
from proxmoxer.tools import Tasks

urllib3.disable_warnings()
host, port, token_name, token_value = sys.argv[1:5]
px = ProxmoxAPI(host, port=int(port), user="root@pam", token_name=token_name,
                token_value=token_value, verify_ssl=False, service="PVE", timeout=30)
node = px.nodes("pve01")


def wait(upid):
    status = Tasks.blocking_status(px, upid, timeout=60, polling_interval=0.05)
    assert status["status"] == "stopped" and status["exitstatus"] == "OK", status


def refused(call, status):
    try:
        call()
    except ResourceException as e:
        assert e.status_code == status, (e.status_code, e.content)
        return str(e)
    raise AssertionError(f"expected HTTP {status}")


assert px.version.get()["version"].startswith("9.")
assert [n["node"] for n in px.nodes.get()] == ["pve01", "pve02"]
members = [e["name"] for e in px.cluster.status.get() if e["type"] == "node"]
assert members == ["pve01", "pve02"], members
vmid = int(px.cluster.nextid.get())
assert vmid == 100, vmid

wait(node.qemu.post(vmid=vmid, name="web", memory=1024, cores=2, scsihw="virtio-scsi-pci",
                    scsi0="local-lvm:4", net0="virtio,bridge=vmbr0", ostype="l26"))
config = node.qemu(vmid).config.get()
assert config["memory"] == "1024" and config["cores"] == 2, config
assert config["scsi0"].startswith(f"local-lvm:vm-{vmid}-disk-0"), config
assert node.qemu(vmid).config.put(memory=2048, description="set by proxmoxer") is None
wait(node.qemu(vmid).status.start.post())
assert node.qemu(vmid).status.current.get()["status"] == "running"
snapshots = node.qemu(vmid).snapshot.get()
assert [s["name"] for s in snapshots] == ["current"] and snapshots[0]["running"] == 1, snapshots
wait(node.qemu(vmid).status.stop.post())
wait(node.qemu(vmid).resize.put(disk="scsi0", size="+1G"))
wait(node.qemu(vmid).clone.post(newid=vmid + 1, name="web-copy", full=1))
wait(node.qemu(vmid).delete(purge=1))
assert [e["vmid"] for e in px.cluster.resources.get(type="vm")] == [vmid + 1]

message = refused(lambda: node.qemu(vmid + 1).config.put(memory="lots"), 400)
assert "memory" in message, message
message = refused(lambda: node.qemu(vmid).config.get(), 500)
assert f"qemu-server/{vmid}.conf' does not exist" in message, message
print("ok")
