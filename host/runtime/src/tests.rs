//! Runtime tests against real components built by host/guests: the misbehaving test kind
//! for limits and sandboxing, the bundled kinds for loading and caching.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::{
    CacheOutcome, GuestError, GuestRun, KindComponent, Limits, Runtime, RuntimeConfig, SecretAccess,
};

fn runtime() -> &'static Arc<Runtime> {
    static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::new(RuntimeConfig::default()).expect("runtime"))
}

fn misbehave_wasm() -> Vec<u8> {
    let path =
        proxops_guests::artifact_path("proxops-kind-misbehave").expect("misbehave guest is built");
    std::fs::read(path).expect("read misbehave.wasm")
}

fn misbehave(limits: Limits) -> KindComponent {
    runtime()
        .load_kind("misbehave", &misbehave_wasm(), limits, SecretAccess::None)
        .expect("load misbehave")
}

/// Run `validate(input)` on a fresh instance (a run of its own). After a failure that
/// stops the guest, the same instance answers `Stopped`; a new instance (a new run) works.
fn check(component: &KindComponent, input: &str) -> Result<String, GuestError> {
    let mut instance = component.instance().expect("instance");
    let result = instance
        .validate(input)
        .map(|r| r.expect("validate ok").desired);
    let after = instance.validate("still alive");
    match &result {
        Err(e) if e.stops_the_guest() => {
            assert!(
                matches!(after, Err(GuestError::Stopped { .. })),
                "{after:?}"
            );
            let mut fresh = component.instance().expect("a new run");
            let again = fresh.validate("still alive").expect("call").expect("ok");
            assert_eq!(again.desired, "still alive");
        }
        _ => assert_eq!(
            after.expect("call after").expect("ok").desired,
            "still alive"
        ),
    }
    result
}

#[test]
fn endless_loop_hits_the_deadline_within_twice_the_deadline() {
    let limits = Limits {
        deadline: Duration::from_millis(500),
        ..Limits::KIND
    };
    let component = misbehave(limits);
    let start = Instant::now();
    let err = check(&component, "loop").unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        matches!(
            err,
            GuestError::Deadline {
                call: "validate",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("guest `misbehave`"), "{err}");
    assert!(elapsed < 2 * limits.deadline, "took {elapsed:?}");
}

#[test]
fn allocation_bomb_hits_the_memory_limit() {
    let component = misbehave(Limits {
        memory: 64 << 20,
        ..Limits::KIND
    });
    let err = check(&component, "alloc").unwrap_err();
    assert!(
        matches!(err, GuestError::Memory { limit, .. } if limit == 64 << 20),
        "{err}"
    );
}

#[test]
fn huge_result_hits_the_output_limit() {
    let component = misbehave(Limits::KIND);
    let err = check(&component, "big").unwrap_err();
    assert!(
        matches!(err, GuestError::OutputTooLarge { size, limit, .. } if size >= 64 << 20 && limit == Limits::KIND.output),
        "{err}"
    );
}

#[test]
fn panic_carries_the_guest_message() {
    let component = misbehave(Limits::KIND);
    let err = check(&component, "panic").unwrap_err();
    match &err {
        GuestError::Panic { message, call, .. } => {
            assert!(message.contains("misbehave: asked to panic"), "{message}");
            assert_eq!(*call, "validate");
        }
        other => panic!("expected a panic error, got {other}"),
    }
}

#[test]
fn capabilities_are_denied() {
    let component = misbehave(Limits::KIND);
    let file = check(&component, "file").unwrap();
    assert!(file.starts_with("denied:"), "file access: {file}");
    let env = check(&component, "env").unwrap();
    assert!(env.starts_with("vars=0 args=0 home=denied:"), "env: {env}");
    let socket = check(&component, "socket").unwrap();
    assert!(socket.starts_with("denied:"), "socket: {socket}");
}

#[test]
fn clocks_and_randomness_are_reproducible() {
    let component = misbehave(Limits::KIND);
    for input in ["clock", "random"] {
        let a = check(&component, input).unwrap();
        let b = check(&misbehave(Limits::KIND), input).unwrap();
        assert_eq!(a, b, "{input} differs between instances");
    }
    assert_eq!(check(&component, "clock").unwrap(), "1704067200");
}

#[test]
fn log_is_bounded() {
    let component = misbehave(Limits {
        log_lines: 50,
        ..Limits::KIND
    });
    let mut instance = component.instance().unwrap();
    instance.validate("log").unwrap().unwrap();
    let log = instance.last_log();
    assert_eq!(log.lines.len(), 50);
    assert_eq!(log.dropped, 10_000 - 50);
    assert_eq!(log.lines[0], "info: line 0");
}

#[test]
fn limits_above_the_engine_maximum_are_refused() {
    let err = runtime()
        .load_kind(
            "misbehave",
            &misbehave_wasm(),
            Limits {
                memory: usize::MAX,
                ..Limits::KIND
            },
            SecretAccess::None,
        )
        .unwrap_err();
    assert!(err.to_string().contains("memory limit"), "{err}");
}

#[test]
fn a_core_module_is_refused_with_a_clear_error() {
    // The smallest valid core module: magic and version.
    let err = runtime()
        .load_kind("core", b"\0asm\x01\0\0\0", Limits::KIND, SecretAccess::None)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("guest `core` is not a valid proxops component"),
        "{err}"
    );
}

#[test]
fn cache_is_hit_on_a_second_runtime_and_rebuilt_when_tampered() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().to_path_buf()),
    };
    let wasm = misbehave_wasm();
    let load = |rt: &Runtime| {
        rt.load_kind("misbehave", &wasm, Limits::KIND, SecretAccess::None)
            .unwrap()
    };

    let first = load(&Runtime::new(config.clone()).unwrap());
    assert_eq!(first.cache_outcome(), CacheOutcome::Miss);
    let second = load(&Runtime::new(config.clone()).unwrap());
    assert_eq!(second.cache_outcome(), CacheOutcome::Hit);
    assert_eq!(check(&second, "echo").unwrap(), "echo");

    // Flip one byte in the middle of the entry: detected, rebuilt, and usable.
    let entry = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .expect("a cache entry");
    let mut bytes = std::fs::read(&entry).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let third = load(&Runtime::new(config.clone()).unwrap());
    assert_eq!(third.cache_outcome(), CacheOutcome::Rebuilt);
    assert_eq!(check(&third, "echo").unwrap(), "echo");
    let fourth = load(&Runtime::new(config).unwrap());
    assert_eq!(fourth.cache_outcome(), CacheOutcome::Hit);

    // A foreign file under the entry's name (not ours at all) is rebuilt too.
    std::fs::write(&entry, b"not a cache entry").unwrap();
    let fifth = load(
        &Runtime::new(RuntimeConfig {
            cache_dir: Some(dir.path().into()),
        })
        .unwrap(),
    );
    assert_eq!(fifth.cache_outcome(), CacheOutcome::Rebuilt);
}

#[test]
fn every_bundled_kind_loads_and_describes_itself() {
    let kinds: Vec<_> = proxops_guests::bundled(proxops_guests::Role::Kind)
        .map(|b| {
            runtime()
                .load_kind(b.package, b.bytes, Limits::KIND, SecretAccess::None)
                .unwrap()
        })
        .map(|k| k.info().kind.clone())
        .collect();
    for expected in ["VM", "TemplateVM", "DiskImage", "ISO", "HARule"] {
        assert!(
            kinds.iter().any(|k| k == expected),
            "{expected} missing from {kinds:?}"
        );
    }
}

fn bundled_kind(package: &str) -> &'static proxops_guests::Bundled {
    proxops_guests::bundled(proxops_guests::Role::Kind)
        .find(|b| b.package == package)
        .unwrap_or_else(|| panic!("{package} is bundled"))
}

#[test]
fn every_bundled_kind_loads_from_its_precompiled_artifact() {
    for b in proxops_guests::bundled(proxops_guests::Role::Kind) {
        let precompiled = b
            .precompiled
            .unwrap_or_else(|| panic!("{} was not precompiled by the build", b.package));
        // No cache folder: a refusal would show up as `Disabled`, not as a cache hit.
        let kind = runtime()
            .load_kind_precompiled(
                b.package,
                b.bytes,
                Some(precompiled),
                Limits::KIND,
                SecretAccess::None,
            )
            .unwrap();
        assert_eq!(
            kind.cache_outcome(),
            CacheOutcome::Precompiled,
            "{}",
            b.package
        );
        kind.instance()
            .expect("an instance of the precompiled kind");
    }
}

/// The target the build precompiled for, read from an embedded artifact's frame.
fn precompiled_target() -> &'static str {
    let disk = bundled_kind("proxops-kind-diskimage");
    proxops_engine::unframe(
        disk.bytes,
        disk.precompiled.expect("diskimage is precompiled"),
    )
    .expect("the embedded artifact's frame")
    .target
}

/// `wasm` compiled as host/guests/build.rs does, but with `cfg`; framed with the digest of
/// `frame_engine`'s settings (`cfg`'s when `None`: an honest frame; another to forge one).
fn precompile_with(
    wasm: &[u8],
    cfg: wasmtime::Config,
    frame_cfg: Option<wasmtime::Config>,
) -> Vec<u8> {
    let target = precompiled_target();
    let engine = proxops_engine::precompile_engine(cfg, target).unwrap();
    let payload = engine.precompile_component(wasm).unwrap();
    let framer = match frame_cfg {
        Some(cfg) => proxops_engine::precompile_engine(cfg, target).unwrap(),
        None => engine,
    };
    proxops_engine::frame(wasm, &framer, target, &payload)
}

fn try_precompiled(wasm: &[u8], framed: &[u8]) -> Result<(), String> {
    let rt = runtime();
    crate::cache::load_precompiled(&rt.engine, |t| rt.reference_digest(t), wasm, framed).map(drop)
}

/// Artifacts that do not fit are refused and the kind is compiled (and cached) instead: one
/// compiled under another engine setting, one whose frame lies about its settings, a corrupt
/// one and one made from another component. The real DiskImage kind, compiled with wasmtime
/// exactly as host/guests/build.rs compiles it.
#[test]
fn a_precompiled_artifact_that_does_not_fit_is_refused_and_the_kind_compiled() {
    let disk = bundled_kind("proxops-kind-diskimage");

    // NaN canonicalization off: wasmtime would load this one (it deems the flag harmless),
    // proxops's engine digest refuses it.
    let mut cfg = proxops_engine::engine_config(false);
    cfg.cranelift_nan_canonicalization(false);
    let other_setting = precompile_with(disk.bytes, cfg, None);
    let refused = try_precompiled(disk.bytes, &other_setting).expect_err("refused");
    assert!(refused.contains("other engine settings"), "{refused}");

    // Epoch interruption off, in a frame that claims the runtime's settings: wasmtime's own
    // check refuses it.
    let mut cfg = proxops_engine::engine_config(false);
    cfg.epoch_interruption(false);
    let forged = precompile_with(disk.bytes, cfg, Some(proxops_engine::engine_config(false)));
    let refused = try_precompiled(disk.bytes, &forged).expect_err("refused");
    assert!(refused.contains("wasmtime refused it"), "{refused}");

    // Through the runtime: compiled and cached, then the cache serves the next runtime.
    let dir = tempfile::tempdir().unwrap();
    let load = |framed: &[u8]| {
        Runtime::new(RuntimeConfig {
            cache_dir: Some(dir.path().to_path_buf()),
        })
        .unwrap()
        .load_kind_precompiled(
            "diskimage",
            disk.bytes,
            Some(framed),
            Limits::KIND,
            SecretAccess::None,
        )
        .unwrap()
    };
    let first = load(&other_setting);
    assert_eq!(first.cache_outcome(), CacheOutcome::Miss);
    first.instance().expect("an instance of the compiled kind");
    assert_eq!(load(&forged).cache_outcome(), CacheOutcome::Hit);

    // The embedded artifact with one byte flipped in its payload: refused before wasmtime
    // reads it.
    let mut corrupt = disk.precompiled.expect("diskimage is precompiled").to_vec();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0xff;
    let refused = try_precompiled(disk.bytes, &corrupt).expect_err("refused");
    assert!(refused.contains("corrupt"), "{refused}");
    assert_eq!(load(&corrupt).cache_outcome(), CacheOutcome::Hit);

    // A valid artifact of another kind (ISO's), offered for DiskImage: refused, compiled.
    let iso = bundled_kind("proxops-kind-iso").precompiled.unwrap();
    let refused = try_precompiled(disk.bytes, iso).expect_err("refused");
    assert!(refused.contains("another .wasm"), "{refused}");
    let kind = runtime()
        .load_kind_precompiled(
            "diskimage",
            disk.bytes,
            Some(iso),
            Limits::KIND,
            SecretAccess::None,
        )
        .unwrap();
    assert_eq!(kind.cache_outcome(), CacheOutcome::Disabled);
    assert_eq!(kind.info().kind, "DiskImage");
}

/// An artifact that needs a CPU feature this machine lacks (as one built on another machine
/// might) is refused: by the engine digest when its frame is honest, by wasmtime's CPU check
/// when the frame claims the baseline. Runs where the host lacks one of the features below.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_precompiled_artifact_for_a_cpu_this_machine_is_not_is_refused() {
    let missing = [
        (
            "avx512f",
            "has_avx512f",
            std::is_x86_feature_detected!("avx512f"),
        ),
        (
            "avx512vl",
            "has_avx512vl",
            std::is_x86_feature_detected!("avx512vl"),
        ),
        ("avx2", "has_avx2", std::is_x86_feature_detected!("avx2")),
        ("bmi2", "has_bmi2", std::is_x86_feature_detected!("bmi2")),
    ]
    .into_iter()
    .find(|(_, _, present)| !present);
    let Some((feature, flag, _)) = missing else {
        eprintln!("this CPU has every feature the test could ask for; nothing to check");
        return;
    };
    let disk = bundled_kind("proxops-kind-diskimage");
    let mut cfg = proxops_engine::engine_config(false);
    // SAFETY: the code compiled here is never run; only its loading is attempted.
    #[allow(unsafe_code)]
    unsafe {
        cfg.cranelift_flag_enable(flag);
    }
    let honest = precompile_with(disk.bytes, cfg.clone(), None);
    let refused = try_precompiled(disk.bytes, &honest).expect_err(feature);
    assert!(refused.contains("other engine settings"), "{refused}");
    let forged = precompile_with(disk.bytes, cfg, Some(proxops_engine::engine_config(false)));
    let refused = try_precompiled(disk.bytes, &forged).expect_err(feature);
    assert!(refused.contains("wasmtime refused it"), "{refused}");
}

/// What a misbehaviour must come to.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// The call answers, starting with this text.
    Answer(&'static str),
    /// The call answers, and its log kept `log_lines` lines, the first one this.
    Printed(&'static str),
    Deadline,
    Memory,
    Panic(&'static str),
}

/// Every misbehaviour the sandbox must contain, as the misbehave kind's `validate` performs it.
const BEHAVIOURS: &[(&str, Want)] = &[
    ("panic", Want::Panic("misbehave: asked to panic")),
    ("stdout", Want::Printed("stdout: stdout line 0")),
    ("stderr", Want::Printed("stderr: stderr line 0")),
    ("stdin", Want::Answer("stdin: 0 bytes")),
    ("sleep", Want::Answer("slept an hour")),
    ("clock", Want::Answer("1704067200")),
    ("wait", Want::Deadline),
    ("socket", Want::Answer("denied:")),
    ("alloc3g", Want::Memory),
    ("loop", Want::Deadline),
];

fn check_behaviour(component: &KindComponent, input: &str, want: Want) {
    let mut instance = component.instance().expect("instance");
    let result = instance
        .validate(input)
        .map(|r| r.expect("validate ok").desired);
    match (want, &result) {
        (Want::Answer(prefix), Ok(text)) => assert!(text.starts_with(prefix), "{input}: {text}"),
        (Want::Printed(first), Ok(text)) => {
            assert_eq!(text, "printed", "{input}");
            let log = instance.last_log();
            assert_eq!(log.lines.len(), 50, "{input}");
            assert_eq!(log.lines[0], first, "{input}");
            assert_eq!(log.dropped, 10_000 - 50, "{input}");
        }
        (Want::Deadline, Err(e @ GuestError::Deadline { .. }))
        | (Want::Memory, Err(e @ GuestError::Memory { .. })) => {
            assert!(
                e.to_string().starts_with("guest `misbehave`: validate"),
                "{e}"
            );
        }
        (Want::Panic(text), Err(e @ GuestError::Panic { message, .. })) => {
            assert!(message.contains(text), "{message}");
            assert!(message.len() < 700, "bounded: {message}");
            assert!(
                e.to_string()
                    .starts_with("guest `misbehave`: validate panicked"),
                "{e}"
            );
        }
        (want, got) => panic!("{input}: wanted {want:?}, got {got:?}"),
    }
    // A guest that failed is stopped in its run; a new run gets a fresh instance.
    let after = instance.validate("still alive");
    if result.is_err() {
        assert!(
            matches!(after, Err(GuestError::Stopped { .. })),
            "{input}: {after:?}"
        );
        instance = component.instance().expect("a new run");
    } else {
        assert_eq!(
            after.expect("call after").expect("ok").desired,
            "still alive"
        );
    }
    assert_eq!(
        instance
            .validate("echo")
            .expect("call")
            .expect("ok")
            .desired,
        "echo"
    );
}

fn short_limits() -> Limits {
    Limits {
        deadline: Duration::from_millis(300),
        memory: 64 << 20,
        log_lines: 50,
        ..Limits::KIND
    }
}

/// Each behaviour, called from a plain thread, a current-thread tokio runtime and a
/// multi-threaded one (where wasmtime-wasi's blocking I/O used to panic the host). The
/// behaviours that must end at the deadline get a short one; the others the kinds' default
/// (printing 10,000 lines is 10,000 host calls).
#[test]
fn every_misbehaviour_is_contained_on_any_thread() {
    let short = misbehave(short_limits());
    let roomy = misbehave(Limits {
        deadline: Limits::KIND.deadline,
        ..short_limits()
    });
    let all = || {
        for (input, want) in BEHAVIOURS {
            let component = if matches!(want, Want::Deadline) {
                &short
            } else {
                &roomy
            };
            check_behaviour(component, input, *want);
        }
    };
    all();
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    current.block_on(async { all() });
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    multi.block_on(async { all() });
}

#[test]
fn a_failed_guest_is_not_called_again_in_its_run() {
    let component = misbehave(short_limits());
    for input in ["loop", "panic", "alloc3g"] {
        let run = GuestRun::new(None);
        let mut instance = component.instance_in(&run).unwrap();
        let first = instance.validate(input).unwrap_err();
        assert_eq!(run.calls(), 1);
        // The same instance object, another instance, a fresh one: all refused at once.
        let again = instance.validate("echo").unwrap_err();
        assert!(
            matches!(&again, GuestError::Stopped { first: f, .. } if **f == first),
            "{again}"
        );
        assert!(
            again.to_string().contains("already failed in this run"),
            "{again}"
        );
        let other = component.instance_in(&run).unwrap_err();
        assert_eq!(other.first(), &first);
        assert_eq!(run.calls(), 1, "{input}: no call after the failure");
        assert_eq!(run.failure().as_ref(), Some(&first));
        // Another run calls it again.
        let fresh = GuestRun::new(None);
        let mut instance = component.instance_in(&fresh).unwrap();
        assert_eq!(instance.validate("echo").unwrap().unwrap().desired, "echo");
        assert_eq!(fresh.calls(), 1);
    }
    // An oversized answer refuses that answer only.
    let run = GuestRun::new(None);
    let mut instance = misbehave(Limits::KIND).instance_in(&run).unwrap();
    assert!(matches!(
        instance.validate("big"),
        Err(GuestError::OutputTooLarge { .. })
    ));
    assert_eq!(instance.validate("echo").unwrap().unwrap().desired, "echo");
    assert!(run.failure().is_none());
}

#[test]
fn the_run_budget_bounds_a_guest_below_its_deadline() {
    let component = misbehave(Limits {
        deadline: Duration::from_secs(30),
        ..Limits::KIND
    });
    let run = GuestRun::new(Some(Duration::from_millis(200)));
    let mut instance = component.instance_in(&run).unwrap();
    // Well-behaved calls fit in the budget.
    assert_eq!(instance.validate("echo").unwrap().unwrap().desired, "echo");
    let err = instance.validate("loop").unwrap_err();
    assert!(
        matches!(err, GuestError::Budget { budget, .. } if budget == Duration::from_millis(200)),
        "{err}"
    );
    assert!(err.to_string().contains("budget"), "{err}");
    assert!(matches!(
        instance.validate("echo"),
        Err(GuestError::Stopped { .. })
    ));
    assert_eq!(run.calls(), 2);
}

#[test]
fn guest_prose_is_cut_where_the_call_returns() {
    let component = misbehave(Limits::KIND);
    let mut instance = component.instance().expect("instance");
    let manifest = r#"{"metadata":{"name":"m"},"spec":{"validate":"long"}}"#;
    let validated = instance.validate(manifest).expect("call").expect("ok");
    let message = &validated.warnings[0].message;
    // "misbehave: " and 512 KiB of `y`, cut to MAX_PROSE characters.
    let left = (512 << 10) + "misbehave: ".len() - crate::size::MAX_PROSE;
    assert!(
        message.ends_with(&format!("y… ({left} more characters)")),
        "{}",
        &message[message.len() - 60..]
    );
    assert_eq!(
        message.chars().count(),
        crate::size::MAX_PROSE + format!("… ({left} more characters)").chars().count()
    );
    // The desired state is a value, never cut.
    assert_eq!(validated.desired, r#"{"validate":"long","name":"m"}"#);
}

#[test]
fn cut_keeps_short_text_and_counts_what_it_leaves_out() {
    for (text, max, expected) in [
        ("", 3, ""),
        ("abc", 3, "abc"),
        ("abcd", 3, "abc… (1 more characters)"),
        ("ééééé", 2, "éé… (3 more characters)"),
    ] {
        let mut s = text.to_string();
        crate::size::cut(&mut s, max);
        assert_eq!(s, expected, "{text:?}");
    }
}
