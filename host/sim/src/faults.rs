//! Seeded, reproducible fault injection: rules matched per endpoint that add latency, answer 5xx, reset connections or fail tasks.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// What a matching rule does.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum FaultKind {
    /// Delay the answer by `ms` milliseconds (combines with the other kinds).
    Latency { ms: u64 },
    /// Answer with this status and message instead of running the handler.
    Status { code: u16, message: String },
    /// Close the connection without any response.
    Reset,
    /// Let the request start its task, then fail the task with this message (async endpoints only).
    FailTask { message: String },
    /// PVE's per-VM flock timeout: a 500 on sync endpoints, a failed task on async ones.
    LockTimeout,
}

fn star() -> String {
    "*".to_string()
}

/// One fault rule. JSON: `{"method":"POST","path":"/nodes/{node}/qemu","kind":{"type":"fail-task","message":"boom"},"times":1}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultRule {
    /// HTTP method or `*`.
    #[serde(default = "star")]
    pub method: String,
    /// Path template below /api2/json (`/nodes/{node}/qemu/{vmid}/config`) or `*`.
    #[serde(default = "star")]
    pub path: String,
    pub kind: FaultKind,
    /// Chance in [0, 1] that a matching request triggers the rule (seeded RNG).
    #[serde(default)]
    pub probability: Option<f64>,
    /// Trigger on the first N matching requests only.
    #[serde(default)]
    pub times: Option<u32>,
}

/// The faults one request has drawn.
#[derive(Debug, Default, Clone)]
pub(crate) struct Drawn {
    pub latency_ms: u64,
    pub status: Option<(u16, String)>,
    pub reset: bool,
    pub fail_task: Option<String>,
    pub lock_timeout: bool,
}

/// Rules plus the seeded RNG and per-rule trigger counts.
pub(crate) struct FaultEngine {
    rules: Vec<(FaultRule, u32)>,
    rng: ChaCha8Rng,
}

impl FaultEngine {
    pub(crate) fn new(rules: Vec<FaultRule>, seed: u64) -> FaultEngine {
        FaultEngine {
            rules: rules.into_iter().map(|r| (r, 0)).collect(),
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_fa17),
        }
    }

    pub(crate) fn set(&mut self, rules: Vec<FaultRule>) {
        self.rules = rules.into_iter().map(|r| (r, 0)).collect();
    }

    pub(crate) fn rules(&self) -> Vec<FaultRule> {
        self.rules.iter().map(|(r, _)| r.clone()).collect()
    }

    /// Draws the faults for one request to `method template`.
    pub(crate) fn draw(&mut self, method: &str, template: &str) -> Drawn {
        let mut d = Drawn::default();
        for (rule, fired) in self.rules.iter_mut() {
            if rule.method != "*" && !rule.method.eq_ignore_ascii_case(method) {
                continue;
            }
            if rule.path != "*" && rule.path != template {
                continue;
            }
            if let Some(times) = rule.times
                && *fired >= times
            {
                continue;
            }
            if let Some(p) = rule.probability {
                let x: f64 = self.rng.random();
                if x >= p {
                    continue;
                }
            }
            *fired += 1;
            match &rule.kind {
                FaultKind::Latency { ms } => d.latency_ms += ms,
                FaultKind::Status { code, message } => {
                    if d.status.is_none() && !d.reset {
                        d.status = Some((*code, message.clone()));
                    }
                }
                FaultKind::Reset => {
                    if d.status.is_none() {
                        d.reset = true;
                    }
                }
                FaultKind::FailTask { message } => {
                    if d.fail_task.is_none() {
                        d.fail_task = Some(message.clone());
                    }
                }
                FaultKind::LockTimeout => d.lock_timeout = true,
            }
        }
        d
    }
}
