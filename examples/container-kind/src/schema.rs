//! The JSON Schema (draft 2020-12) of a `kind: Container` manifest, for editors and
//! `proxops schema`. `validate` is the authority; the schema mirrors its structure.

use proxops_kind_sdk::manifest::manifest_schema;
use serde_json::{Value, json};

use crate::KIND;
use crate::desired::HaState;

/// The whole manifest's schema.
pub fn schema() -> Value {
    let size = json!({
        "type": "string",
        "pattern": "^[0-9]+(\\.[0-9]+)?(B|KiB|MiB|GiB|TiB)$",
        "description": "A binary size such as `8GiB` or `512MiB`."
    });
    let storage = json!({
        "type": "string",
        "pattern": "^[a-z][a-z0-9._-]*[a-z0-9]$",
        "description": "PVE storage id, e.g. `local-lvm`."
    });
    let abs_path = json!({"type": "string", "pattern": "^/"});
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["vmid", "node", "ostemplate", "memory", "rootfs"],
        "properties": {
            "vmid": {"type": "integer", "minimum": 100, "maximum": 999999999,
                     "description": "PVE vmid; one pool with VMs across the cluster."},
            "node": {"type": "string", "description": "PVE node that hosts the container."},
            "hostname": {"type": "string", "description": "Host name (`hostname`); defaults to metadata.name. DNS labels separated by `.`."},
            "ostemplate": {"type": "string", "pattern": "^[a-z][a-z0-9._-]*[a-z0-9]:vztmpl/[^/]+$",
                           "description": "Template volume `<storage>:vztmpl/<file>`; used at create only."},
            "cores": {"type": "integer", "minimum": 1, "maximum": 8192, "description": "`cores`; absent = not managed."},
            "memory": {"allOf": [size], "description": "`memory`, whole MiB, at least 16MiB, e.g. `1GiB`."},
            "swap": {"allOf": [size], "description": "`swap`, whole MiB (`0MiB` for none); absent = not managed."},
            "rootfs": {
                "type": "object", "additionalProperties": false, "required": ["storage", "size"],
                "properties": {
                    "storage": storage,
                    "size": {"allOf": [size], "description": "Whole GiB; grows in place, never shrinks."}
                }
            },
            "mount-points": {
                "type": "array",
                "items": {
                    "type": "object", "additionalProperties": false, "required": ["path"],
                    "properties": {
                        "slot": {"type": "string", "pattern": "^mp(0|[1-9][0-9]{0,2})$", "description": "`mpN`; defaults to the position in the list."},
                        "storage": storage,
                        "size": {"allOf": [size], "description": "Whole GiB (new volume)."},
                        "host-path": {"allOf": [abs_path], "description": "Host directory or device to bind-mount (needs the operator's `bind-mounts` grant)."},
                        "path": {"allOf": [abs_path], "description": "Mount path inside the container (`mp=`)."},
                        "read-only": {"type": "boolean", "description": "`ro=`"},
                        "backup": {"type": "boolean", "description": "`backup=` (volumes only)."}
                    },
                    "oneOf": [
                        {"required": ["storage", "size"], "not": {"required": ["host-path"]}},
                        {"required": ["host-path"], "not": {"anyOf": [{"required": ["storage"]}, {"required": ["size"]}, {"required": ["backup"]}]}}
                    ]
                }
            },
            "nics": {
                "type": "array", "maxItems": 32,
                "items": {
                    "type": "object", "additionalProperties": false, "required": ["bridge"],
                    "properties": {
                        "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,15}$", "description": "Interface name inside the container; default `eth<N>`."},
                        "bridge": {"type": "string", "description": "PVE bridge, e.g. `vmbr0`."},
                        "ip": {"type": "string", "description": "`dhcp` or an IPv4 CIDR such as `192.168.1.20/24`."},
                        "gw": {"type": "string", "description": "IPv4 gateway (with a static ip)."},
                        "firewall": {"type": "boolean"},
                        "vlan": {"type": "integer", "minimum": 1, "maximum": 4094, "description": "802.1Q tag (`tag=`)."},
                        "mac": {"type": "string", "pattern": "^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$", "description": "Pinned MAC (`hwaddr=`); absent keeps the one PVE assigned."}
                    }
                }
            },
            "features": {
                "type": "object", "additionalProperties": false,
                "properties": {
                    "nesting": {"type": "boolean"},
                    "keyctl": {"type": "boolean"},
                    "fuse": {"type": "boolean"}
                }
            },
            "unprivileged": {"type": "boolean", "default": true,
                             "description": "`unprivileged`; false (a privileged container) needs the operator's `privileged` grant. Cannot change after create."},
            "onboot": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9_][A-Za-z0-9_+.-]*$"},
                     "description": "PVE user tags; proxops adds `proxops` and `proxops-<vmid>`."},
            "description": {"type": "string"},
            "state": {"enum": ["running", "stopped"], "default": "running"},
            "ha": {
                "type": "object", "additionalProperties": false,
                "description": "The container's PVE HA resource (ct:<vmid>), its comment carrying proxops's ownership mark. Absent: HA membership is not managed (a resource proxops created is removed, any other left alone).",
                "properties": {
                    "state": {"enum": HaState::ALL,
                              "description": "Requested HA state; defaults to spec.state (running: started, stopped: stopped). `disabled` needs spec.state: stopped; `ignored` leaves the container to proxops."},
                    "max-restart": {"type": "integer", "minimum": 0, "maximum": 4294967295u64, "default": 1,
                                    "description": "Restart tries on a node after a failed start (PVE max_restart)."},
                    "max-relocate": {"type": "integer", "minimum": 0, "maximum": 4294967295u64, "default": 1,
                                     "description": "Relocate tries to other nodes after failed restarts (PVE max_relocate)."},
                    "failback": {"type": "boolean", "default": true,
                                 "description": "Move back to the node with the highest affinity priority when it comes online (PVE failback)."}
                }
            }
        }
    });
    manifest_schema(KIND, "proxops Container (PVE LXC)", spec)
}
