//! Planning cases: cloud-init data and its secrets, which never leak and fail the plan closed.

use super::*;

#[test]
fn cloud_init_data() {
    // Re-encoding (lower-case hex, `!` kept raw), reordering and DNS order are never drift.
    check(
        Case {
            patches: &[
                ("spec/cloud-init-data/ci-user", json!("deploy")),
                (
                    "spec/cloud-init-data/ssh-keys",
                    json!(["ssh-ed25519 AAAA1 a@h", "ssh-rsa AAAA2+/= b@h"]),
                ),
                (
                    "spec/cloud-init-data/nameservers",
                    json!(["1.1.1.1", "9.9.9.9"]),
                ),
                (
                    "spec/cloud-init-data/search-domains",
                    json!(["b.example", "a.example"]),
                ),
                (
                    "spec/cloud-init-data/ipconfigs",
                    json!([{"nic": 0, "ip": "10.0.0.5/24", "gateway": "10.0.0.1"}]),
                ),
            ],
            config: &[
                ("ciuser", json!("deploy")),
                (
                    "sshkeys",
                    json!("ssh-rsa%20AAAA2%2b%2f%3d%20b%40h%0assh-ed25519%20AAAA1%20a%40h%0A"),
                ),
                ("nameserver", json!("9.9.9.9 1.1.1.1")),
                ("searchdomain", json!("a.example b.example")),
                ("ipconfig0", json!("gw=10.0.0.1,ip=10.0.0.5/24")),
            ],
            ..Case::default()
        },
        &[],
    );
    // Undeclared keys are not owned on a VM that is not a clone: never drift.
    check(
        Case {
            config: &[
                ("ciuser", json!("someone")),
                ("sshkeys", json!("ssh-ed25519%20X%20y")),
                ("ipconfig0", json!("ip=dhcp")),
                ("nameserver", json!("8.8.8.8")),
                ("searchdomain", json!("x.example")),
                ("cipassword", json!("**********")),
            ],
            ..Case::default()
        },
        &[],
    );
    // The `*` sentinel: PVE owns sshkeys; nothing written whatever the live value.
    for live in [None, Some(json!("ssh-ed25519%20X%20y"))] {
        let config: Vec<(&str, Value)> = live.into_iter().map(|v| ("sshkeys", v)).collect();
        check(
            Case {
                patches: &[("spec/cloud-init-data/ssh-keys", json!(["*"]))],
                config: &config,
                ..Case::default()
            },
            &[],
        );
    }
    // Drift is written; the keys in manifest order, joined with %0A, percent-encoded.
    check(
        Case {
            patches: &[
                ("spec/cloud-init-data/ci-user", json!("deploy")),
                (
                    "spec/cloud-init-data/ssh-keys",
                    json!(["ssh-ed25519 AAAA1 a@h", "ssh-rsa AAAA2+/= b@h"]),
                ),
                (
                    "spec/cloud-init-data/nameservers",
                    json!(["9.9.9.9", "1.1.1.1"]),
                ),
                ("spec/cloud-init-data/search-domains", json!(["a.example"])),
                (
                    "spec/cloud-init-data/ipconfigs",
                    json!([{"nic": 0, "ip": "10.0.0.5/24"}]),
                ),
            ],
            config: &[
                ("ciuser", json!("ubuntu")),
                ("sshkeys", json!("ssh-ed25519%20AAAA1%20a%40h")),
                ("nameserver", json!("1.1.1.1")),
                ("ipconfig0", json!("ip=10.0.0.5/24,gw=10.0.0.1")),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: ciuser, sshkeys, nameserver, searchdomain, ipconfig0",
            "  Post /nodes/pve01/qemu/100/config digest=d1 ciuser=deploy sshkeys=ssh-ed25519%20AAAA1%20a%40h%0Assh-rsa%20AAAA2%2B%2F%3D%20b%40h \
nameserver=1.1.1.1 9.9.9.9 searchdomain=a.example ipconfig0=ip=10.0.0.5/24",
            "drift spec.cloud-init-data.ci-user: ubuntu -> deploy",
            "drift spec.cloud-init-data.ssh-keys: ssh-ed25519%20AAAA1%20a%40h -> ssh-ed25519%20AAAA1%20a%40h%0Assh-rsa%20AAAA2%2B%2F%3D%20b%40h",
            "drift spec.cloud-init-data.nameservers: 1.1.1.1 -> 1.1.1.1 9.9.9.9",
            "drift spec.cloud-init-data.search-domains: - -> a.example",
            "drift spec.cloud-init-data.ipconfigs[0]: ip=10.0.0.5/24,gw=10.0.0.1 -> ip=10.0.0.5/24",
        ],
    );
    // Created with the VM, in one POST.
    check(
        Case {
            live: None,
            patches: &[
                ("spec/cloud-init-data/ci-user", json!("deploy")),
                (
                    "spec/cloud-init-data/ssh-keys",
                    json!(["ssh-ed25519 AAAA1 a@h"]),
                ),
                (
                    "spec/cloud-init-data/ipconfigs",
                    json!([{"nic": 0, "ip": "10.0.0.5/24", "gateway": "10.0.0.1"}]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host scsi0=local-lvm:32 \
net0=virtio,bridge=vmbr0 ciuser=deploy sshkeys=ssh-ed25519%20AAAA1%20a%40h ipconfig0=ip=10.0.0.5/24,gw=10.0.0.1",
            "drift : - -> VM 100 on pve01",
        ],
    );
}

#[test]
fn cloud_init_secrets() {
    // ssh-key-refs: resolved in manifest order (a ref may hold several lines), sensitive.
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ssh-key-refs",
                json!(["cloud-init.ssh-keys.team", "cloud-init.ssh-keys.alice"]),
            )],
            config: &[("sshkeys", json!("ssh-rsa%20AAAAteam1%20bob%40h"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: sshkeys",
            "  Post /nodes/pve01/qemu/100/config digest=d1 sshkeys=ssh-rsa%20AAAAteam1%20bob%40h%0Assh-ed25519%20AAAAteam2%20carol%40h%0A\
ssh-ed25519%20AAAAcanaryKEY%2B%2F%3D%20alice%40canary[sensitive]",
            "drift spec.cloud-init-data.ssh-key-refs: ssh-rsa%20AAAAteam1%20bob%40h -> cloud-init.ssh-keys.team, cloud-init.ssh-keys.alice [sensitive]",
        ],
    );
    // Same key set, other order and encoding: converged.
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ssh-key-refs",
                json!(["cloud-init.ssh-keys.team"]),
            )],
            config: &[(
                "sshkeys",
                json!("ssh-ed25519%20AAAAteam2%20carol%40h%0assh-rsa%20AAAAteam1%20bob%40h"),
            )],
            ..Case::default()
        },
        &[],
    );
    // cipassword: written only when absent; present (masked) is satisfied; never deleted.
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ci-password-ref",
                json!("cloud-init.passwords.root"),
            )],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: cipassword",
            "  Post /nodes/pve01/qemu/100/config digest=d1 cipassword=canary-pw-7f3a[sensitive]",
            "drift spec.cloud-init-data.ci-password-ref: - -> cloud-init.passwords.root [sensitive]",
        ],
    );
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ci-password-ref",
                json!("cloud-init.passwords.root"),
            )],
            config: &[("cipassword", json!("**********"))],
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            live: None,
            patches: &[
                (
                    "spec/cloud-init-data/ci-password-ref",
                    json!("cloud-init.passwords.root"),
                ),
                (
                    "spec/cloud-init-data/ssh-key-refs",
                    json!(["cloud-init.ssh-keys.alice"]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host scsi0=local-lvm:32 \
net0=virtio,bridge=vmbr0 cipassword=canary-pw-7f3a[sensitive] sshkeys=ssh-ed25519%20AAAAcanaryKEY%2B%2F%3D%20alice%40canary[sensitive]",
            "drift : - -> VM 100 on pve01",
        ],
    );
}

/// A secret value appears in the serialised proposal only inside sensitive params and
/// sensitive changes; never in a summary, drift value, anomaly or diagnostic.
#[test]
fn secrets_never_leak() {
    use crate::validate_tests::{CANARY_KEY, CANARY_PASSWORD};
    let encoded_key = crate::cloudinit::urlencode(CANARY_KEY);
    let canaries = [
        CANARY_PASSWORD,
        CANARY_KEY,
        encoded_key.as_str(),
        "AAAAcanaryKEY",
    ];
    let patches = [
        (
            "spec/cloud-init-data/ci-password-ref",
            json!("cloud-init.passwords.root"),
        ),
        (
            "spec/cloud-init-data/ssh-key-refs",
            json!(["cloud-init.ssh-keys.alice"]),
        ),
    ];
    for live in [None, Some(entry("stopped", false))] {
        let mut p = run(Case {
            live,
            patches: &patches,
            ..Case::default()
        });
        let mut found = 0;
        for a in &mut p.actions {
            for c in &mut a.calls {
                for p in &mut c.params {
                    if canaries.iter().any(|k| p.value.contains(k)) {
                        assert!(p.sensitive, "{}", p.value);
                        found += 1;
                        p.value = String::new();
                    }
                }
            }
            for c in &mut a.changes {
                if c.sensitive {
                    c.old = None;
                    c.new = None;
                }
            }
        }
        assert_eq!(found, 2);
        let text = format!("{}\n{p:?}", serde_json::to_string(&p).unwrap());
        for k in canaries {
            assert!(!text.contains(k), "{k} leaked: {text}");
        }
    }
    // Debug of the resolved state and of a secrets map never prints a value either.
    let d = crate::validate(
        Flavour::Vm,
        &{
            let mut doc = base();
            for (k, v) in &patches {
                patch(&mut doc, k, v.clone());
            }
            doc
        },
        &secrets(),
    )
    .unwrap()
    .desired;
    let r = crate::cloudinit::resolve(d.cloud_init_data.as_ref(), &secrets()).unwrap();
    let text = format!(
        "{d:?} {r:?} {:?} {}",
        secrets(),
        serde_json::to_string(&d).unwrap()
    );
    for k in canaries {
        assert!(!text.contains(k), "{k} leaked: {text}");
    }
}

#[test]
fn secret_failures_fail_plan_closed() {
    use crate::secrets::{MapSecrets, NoSecrets, Secrets};
    let mut doc = base();
    patch(
        &mut doc,
        "spec/cloud-init-data/ci-password-ref",
        json!("cloud-init.passwords.root"),
    );
    patch(
        &mut doc,
        "spec/cloud-init-data/ssh-key-refs",
        json!(["cloud-init.ssh-keys.alice"]),
    );
    let d = crate::validate(Flavour::Vm, &doc, &secrets())
        .unwrap()
        .desired;
    let obs = Observation::default();
    let plan = |s: &dyn Secrets| {
        crate::plan(Flavour::Vm, Some(&d), &[], s, &obs)
            .unwrap_err()
            .into_iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect::<Vec<_>>()
    };
    // The SOPS document changed after validation: nothing is created.
    assert_eq!(
        plan(&MapSecrets::default()),
        vec![
            "spec.cloud-init-data.ssh-key-refs[0]: `cloud-init.ssh-keys.alice` is not in the cluster's SOPS document; add it, or fix the reference",
            "spec.cloud-init-data.ci-password-ref: `cloud-init.passwords.root` is not in the cluster's SOPS document; add it, or fix the reference",
        ]
    );
    assert_eq!(
        plan(&NoSecrets),
        vec![
            "spec.cloud-init-data.ssh-key-refs[0]: cannot use `cloud-init.ssh-keys.alice`: this kind is not granted access to it (a third-party kind gets references through `secrets.reference`, never values; its grant names the refs under `grant.secrets`)",
            "spec.cloud-init-data.ci-password-ref: cannot use `cloud-init.passwords.root`: this kind is not granted access to it (a third-party kind gets references through `secrets.reference`, never values; its grant names the refs under `grant.secrets`)",
        ]
    );
}
