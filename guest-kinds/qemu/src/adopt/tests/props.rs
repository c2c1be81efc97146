//! Adoption over generated configs (proptest): any config the generator makes round-trips
//! clean.

use super::*;

fn arb_disk(bus: &'static str, n: u32) -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![Just("local-lvm"), Just("ceph"), Just("local-zfs")],
        prop_oneof![
            (1u64..512).prop_map(|g| format!("{g}G")),
            (1u64..64).prop_map(|g| format!("{}M", g * 1024)),
            (1025u64..9000).prop_map(|m| format!("{m}M"))
        ],
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![Just("on"), Just("ignore")]),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![
            Just("native"),
            Just("threads"),
            Just("io_uring")
        ]),
        proptest::option::of(prop_oneof![Just("writeback"), Just("none")]),
    )
        .prop_map(move |(pool, size, iothread, discard, ssd, aio, cache)| {
            let mut v = format!("{pool}:vm-100-disk-{n},size={size}");
            if let Some(b) = iothread.filter(|_| bus == "scsi" || bus == "virtio") {
                v.push_str(&format!(",iothread={}", u8::from(b)));
            }
            if let Some(d) = discard {
                v.push_str(&format!(",discard={d}"));
            }
            if let Some(b) = ssd.filter(|_| bus != "virtio") {
                v.push_str(&format!(",ssd={}", u8::from(b)));
            }
            if let Some(a) = aio {
                v.push_str(&format!(",aio={a}"));
            }
            if let Some(c) = cache {
                v.push_str(&format!(",cache={c}"));
            }
            (format!("{bus}{n}"), v)
        })
}

fn arb_nic(n: u32) -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![
            Just("virtio"),
            Just("e1000"),
            Just("vmxnet3"),
            Just("rtl8139")
        ],
        0u8..=255,
        prop_oneof![Just("vmbr0"), Just("vmbr1"), Just("vnet_a")],
        proptest::option::of(1u16..4095),
        proptest::option::of(prop_oneof![Just("10"), Just("12.5"), Just("0.5")]),
        proptest::option::of(any::<bool>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(model, last, bridge, tag, rate, fw, mtu, legacy)| {
            let mac = format!("BC:24:11:00:{n:02X}:{last:02X}");
            let mut v = if legacy {
                format!(
                    "model={model},macaddr={},bridge={bridge}",
                    mac.to_ascii_lowercase()
                )
            } else {
                format!("{model}={mac},bridge={bridge}")
            };
            if let Some(t) = tag {
                v.push_str(&format!(",tag={t}"));
            }
            if let Some(r) = rate {
                v.push_str(&format!(",rate={r}"));
            }
            if let Some(f) = fw {
                v.push_str(&format!(",firewall={}", u8::from(f)));
            }
            if mtu {
                v.push_str(",mtu=1400");
            }
            (format!("net{n}"), v)
        })
}

#[derive(Debug, Clone)]
struct Generated {
    template: bool,
    running: bool,
    config: Map<String, Value>,
    pending: Vec<(&'static str, Option<&'static str>)>,
}

fn arb_config() -> impl Strategy<Value = Generated> {
    let disks = proptest::sample::subsequence(
        vec![
            ("scsi", 0u32),
            ("scsi", 1),
            ("scsi", 12),
            ("virtio", 0),
            ("virtio", 3),
            ("sata", 0),
            ("sata", 4),
            ("ide", 0),
        ],
        1..4,
    )
    .prop_flat_map(|slots| {
        slots
            .into_iter()
            .map(|(b, n)| arb_disk(b, n))
            .collect::<Vec<_>>()
    });
    let nics = proptest::sample::subsequence(vec![0u32, 1, 2, 7], 1..4)
        .prop_flat_map(|slots| slots.into_iter().map(arb_nic).collect::<Vec<_>>());
    let firmware = prop_oneof![
        Just(vec![]),
        Just(vec![("bios", "seabios"), ("machine", "pc-i440fx-9.2+pve1")]),
        Just(vec![
            ("bios", "ovmf"),
            ("machine", "q35"),
            (
                "efidisk0",
                "local-lvm:vm-100-disk-8,efitype=4m,pre-enrolled-keys=0,size=4M"
            ),
            ("tpmstate0", "local-lvm:vm-100-disk-9,size=4M,version=v2.0")
        ]),
        Just(vec![
            ("bios", "ovmf"),
            ("efidisk0", "local-lvm:vm-100-disk-8,size=128K")
        ]),
        Just(vec![
            ("bios", "ovmf"),
            ("machine", "type=pc-q35-9.2,viommu=virtio"),
            (
                "efidisk0",
                "local-lvm:vm-100-disk-8,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M"
            ),
            ("tpmstate0", "local-lvm:vm-100-disk-9,size=4M")
        ]),
        // An EFI disk and a TPM the manifest cannot state without OVMF and q35.
        Just(vec![
            ("efidisk0", "local-lvm:vm-100-disk-8,efitype=4m,size=4M"),
            ("tpmstate0", "local-lvm:vm-100-disk-9,size=4M,version=v2.0")
        ]),
    ];
    let ci = prop_oneof![
        Just(vec![]),
        Just(vec![
            ("ide2", "local-lvm:vm-100-cloudinit,media=cdrom"),
            ("ciuser", "ops"),
            ("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1"),
            (
                "sshkeys",
                "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIadoptA%20alice%40h"
            )
        ]),
        Just(vec![
            ("ide2", "local-lvm:vm-100-cloudinit,media=cdrom"),
            ("ide3", "none,media=cdrom"),
            ("cipassword", "**********"),
            ("nameserver", "10.0.0.53"),
            ("searchdomain", "corp.example"),
            ("ipconfig0", "ip=dhcp")
        ]),
        Just(vec![("ide2", "none,media=cdrom")]),
        Just(vec![("ide2", "local:iso/x.iso,media=cdrom")]),
    ];
    let misc = proptest::sample::subsequence(
        vec![
            ("onboot", "1"),
            ("protection", "1"),
            ("agent", "1"),
            ("tablet", "0"),
            ("hotplug", "0"),
            ("startup", "order=2"),
            ("balloon", "512"),
            ("ostype", "win11"),
            ("numa", "1"),
            ("sockets", "2"),
            ("vga", "qxl"),
            ("serial0", "socket"),
            ("description", "made by hand"),
            ("tags", "db;Prod"),
            ("hostpci0", "mapping=nic-vf,pcie=0"),
            ("args", "-no-hpet"),
            ("scsihw", "virtio-scsi-pci"),
            ("hostpci1", "0000:01:00.0,pcie=1,rombar=0"),
            ("ide3", "local:iso/y.iso,media=cdrom"),
            ("net9", "virtio=BC:24:11:00:09:01,bridge=vmbr0,queues=4"),
            ("usb0", "spice"),
            ("vga", "type=std,memory=32"),
            ("boot", "order=net0;scsi0"),
            ("cpu", "host,flags=+pcid"),
            ("cores", "4"),
            ("memory", "current=3072"),
        ],
        0..12,
    );
    let name = prop_oneof![
        Just("gen-vm"),
        Just("Gen.VM-01"),
        Just("db1.corp.example.org"),
        Just("x")
    ];
    (
        any::<bool>(),
        any::<bool>(),
        disks,
        nics,
        firmware,
        ci,
        misc,
        16u64..65536,
        proptest::sample::subsequence(
            vec![
                ("memory", Some("8192")),
                ("cores", Some("8")),
                ("onboot", Some("1")),
                ("net1", None),
                ("description", Some("new text")),
            ],
            0..3,
        ),
        name,
    )
        .prop_map(
            |(template, running, disks, nics, firmware, ci, misc, mem, pending, name)| {
                let mut c = Map::new();
                c.insert("name".into(), json!(name));
                c.insert("memory".into(), json!(mem.to_string()));
                c.insert("digest".into(), json!("d"));
                for (k, v) in disks.into_iter().chain(nics) {
                    c.insert(k, json!(v));
                }
                for (k, v) in firmware.into_iter().chain(ci).chain(misc) {
                    c.insert(k.into(), json!(v));
                }
                if template {
                    c.insert("template".into(), json!(1));
                }
                let running = running && !template;
                // Only a running guest has pending changes; a pending delete needs the key, and
                // one NIC must stay (without any, adopt fails: see the error test).
                let nics = c.keys().filter(|k| k.starts_with("net")).count();
                let pending = if running {
                    pending
                        .into_iter()
                        .filter(|(k, v)| v.is_some() || (c.contains_key(*k) && nics > 1))
                        .collect()
                } else {
                    Vec::new()
                };
                Generated {
                    template,
                    running,
                    config: c,
                    pending,
                }
            },
        )
}

#[test]
fn generated_configs_round_trip_clean() {
    let mut runner = TestRunner::new_with_rng(
        PtConfig {
            cases: 64,
            failure_persistence: None,
            ..PtConfig::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let ran = std::cell::Cell::new(0);
    // (templates, running, with pending changes, with gaps)
    let seen = std::cell::Cell::new((0, 0, 0, 0));
    runner
        .run(&arb_config(), |g| {
            let flavour = if g.template {
                Flavour::Template
            } else {
                Flavour::Vm
            };
            let status = if g.running { "running" } else { "stopped" };
            let config = Value::Object(g.config.clone());
            let tags = config.get("tags").and_then(Value::as_str).unwrap_or("");
            let e = entry(100, status, g.template, tags);
            let (a, _) = clean(flavour, &e, &config, &g.pending, &sops());
            // Every live NIC is declared with its MAC pinned, so no plan can change it.
            for (k, v) in &g.config {
                let Some(n) = k.strip_prefix("net") else {
                    continue;
                };
                if g.pending.contains(&(k.as_str(), None)) {
                    continue;
                }
                let nics = a.manifest["spec"]["networks"].as_array().unwrap();
                let nic = nics
                    .iter()
                    .find(|x| x["slot"].as_u64() == n.parse().ok())
                    .unwrap_or_else(|| panic!("{k} not declared"));
                let mac = nic["mac"].as_str().unwrap();
                assert!(
                    v.as_str().unwrap().to_ascii_uppercase().contains(mac),
                    "{k}: {v} vs {mac}"
                );
            }
            let text = a.manifest.to_string();
            assert!(
                !text.contains("*****")
                    && !text.contains("AAAAC3Nza")
                    && !text.contains("-no-hpet"),
                "{text}"
            );
            ran.set(ran.get() + 1);
            let (t, r, p, gp) = seen.get();
            seen.set((
                t + usize::from(g.template),
                r + usize::from(g.running),
                p + usize::from(!g.pending.is_empty()),
                gp + usize::from(a.gaps.len() > 2),
            ));
            Ok(())
        })
        .unwrap();
    assert_eq!(ran.get(), 64);
    let (t, r, p, gp) = seen.get();
    assert!(
        t > 5 && r > 5 && p > 3 && gp > 20,
        "too narrow: {:?}",
        seen.get()
    );
    eprintln!(
        "generated: 64 cases; (templates, running, pending, >2 gaps) = {:?}",
        seen.get()
    );
}
