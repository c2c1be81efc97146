//! `budgets:` of `proxops.yaml`: disruption budgets. A budget names a group of guests (by tag,
//! by name pattern or by listing them), how many of them may be disturbed at once
//! (`max-unavailable`), in which order, and the health gate each disturbed guest must pass
//! before the next one is disturbed. Only the file's form is checked here; which guests a
//! budget holds is decided per cluster, from the validated manifests, by the engine
//! (`proxops_reconcile::rollout`).

use std::time::Duration;

use serde_json::Value;

/// Which guests a budget holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Selector {
    /// Guests whose desired `tags` include any of these.
    Tags(Vec<String>),
    /// Guests whose manifest name matches any of these globs (`*`, `?`).
    Names(Vec<String>),
    /// Exactly these manifest names, in this order.
    Members(Vec<String>),
    /// No `select:`: only the guests whose manifests name the budget (`metadata.budget`).
    Named,
}

impl Selector {
    /// The selector's key in the file.
    pub fn key(&self) -> &'static str {
        match self {
            Selector::Tags(_) => "tags",
            Selector::Names(_) => "names",
            Selector::Members(_) => "members",
            Selector::Named => "metadata.budget",
        }
    }
}

/// `max-unavailable`: a count, or a percentage of the budget's members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u32),
}

impl MaxUnavailable {
    /// How many of `members` guests may be down at once: a count as given; a percentage
    /// rounded down, but at least 1 when it is above 0.
    pub fn of(self, members: usize) -> usize {
        match self {
            MaxUnavailable::Count(n) => n as usize,
            MaxUnavailable::Percent(0) => 0,
            MaxUnavailable::Percent(p) => (members * p as usize / 100).max(1),
        }
    }
}

impl std::fmt::Display for MaxUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxUnavailable::Count(n) => write!(f, "{n}"),
            MaxUnavailable::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The order members are disturbed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// The `members` list's order; for tags and names, manifest name order.
    #[default]
    Declared,
    /// Manifest name order.
    Name,
}

/// What a disturbed guest must show before the next member of its budget is disturbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Health {
    /// Its QEMU guest agent answers `agent/ping`.
    pub agent: bool,
    /// It has been up at least this long.
    pub uptime: Duration,
    /// How long the gate waits before it halts the budget.
    pub timeout: Duration,
    /// A TCP port that must accept a connection from where proxops runs (off by default:
    /// proxops may not reach guest networks).
    pub tcp: Option<Tcp>,
}

/// `health.tcp`: a port to connect to, at `address` or at the guest's first configured
/// address (`ipconfig0` of a VM, `net0` of a container).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Tcp {
    pub port: u16,
    pub address: Option<std::net::IpAddr>,
}

impl Health {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
}

impl Default for Health {
    fn default() -> Self {
        Health {
            agent: false,
            uptime: Duration::ZERO,
            timeout: Health::DEFAULT_TIMEOUT,
            tcp: None,
        }
    }
}

/// One entry of `budgets:`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Budget {
    /// Position in the list, for diagnostics (`budgets[1].select`).
    pub index: usize,
    pub name: String,
    /// The clusters it applies in; empty for all.
    pub clusters: Vec<String>,
    pub select: Selector,
    pub max_unavailable: MaxUnavailable,
    pub order: Order,
    pub health: Health,
    /// `reboot-pending: true`: every apply reboots members whose changes PVE keeps pending
    /// until a reboot, within this budget (as `apply --reboot-pending` does for every guest).
    pub reboot_pending: bool,
}

impl Budget {
    /// The field path of this entry in `proxops.yaml`, e.g. `budgets[1]`.
    pub fn path(&self) -> String {
        format!("budgets[{}]", self.index)
    }

    pub fn applies_to(&self, cluster: &str) -> bool {
        self.clusters.is_empty() || self.clusters.iter().any(|c| c == cluster)
    }
}

const KEYS: &[&str] = &[
    "name",
    "clusters",
    "select",
    "max-unavailable",
    "order",
    "health",
    "reboot-pending",
];
const HEALTH_KEYS: &[&str] = &["agent", "uptime", "timeout", "tcp"];
const SELECTORS: &[&str] = &["tags", "names", "members"];

/// Parse `budgets:`, reporting each bad field through `err`.
pub(crate) fn parse_budgets(v: &Value, err: &mut impl FnMut(String, String)) -> Vec<Budget> {
    let list = match v {
        Value::Null => return Vec::new(),
        Value::Array(list) => list,
        _ => {
            err(
                "budgets".into(),
                "expected a list of {name, select, max-unavailable, order, health}".into(),
            );
            return Vec::new();
        }
    };
    let mut budgets: Vec<Budget> = Vec::new();
    for (index, item) in list.iter().enumerate() {
        let Some(b) = parse_budget(index, item, err) else {
            continue;
        };
        if let Some(first) = budgets.iter().find(|o| o.name == b.name) {
            err(
                format!("budgets[{index}].name"),
                format!(
                    "budget `{}` is declared twice (also budgets[{}]); budget names are unique",
                    b.name, first.index
                ),
            );
            continue;
        }
        budgets.push(b);
    }
    budgets
}

fn parse_budget(
    index: usize,
    item: &Value,
    err: &mut impl FnMut(String, String),
) -> Option<Budget> {
    let at = |k: &str| {
        if k.is_empty() {
            format!("budgets[{index}]")
        } else {
            format!("budgets[{index}].{k}")
        }
    };
    let Some(map) = item.as_object() else {
        err(
            at(""),
            "expected a mapping with name, select and max-unavailable".into(),
        );
        return None;
    };
    let mut ok = true;
    for key in map.keys() {
        if !KEYS.contains(&key.as_str()) {
            err(
                at(key),
                format!("unknown field; expected one of: {}", KEYS.join(", ")),
            );
            ok = false;
        }
    }
    let name = match map.get("name") {
        Some(Value::String(n)) if is_name(n) => Some(n.clone()),
        None => {
            err(at("name"), "required field is missing".into());
            None
        }
        Some(_) => {
            err(
                at("name"),
                "expected a name of letters, digits, `-` and `_`".into(),
            );
            None
        }
    };
    let clusters = match map.get("clusters") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => strings(v, &at("clusters"), err).unwrap_or_else(|| {
            ok = false;
            Vec::new()
        }),
    };
    let select = parse_selector(map.get("select"), &at("select"), err);
    let max_unavailable = match map.get("max-unavailable") {
        None => {
            err(
                at("max-unavailable"),
                "required field is missing; expected a count (1) or a percentage (\"25%\")".into(),
            );
            None
        }
        Some(v) => {
            let parsed = parse_max_unavailable(v);
            if parsed.is_none() {
                err(
                    at("max-unavailable"),
                    "expected a whole number (0 or more) or a percentage from 0% to 100% (\"25%\")"
                        .into(),
                );
            }
            parsed
        }
    };
    let order = match map.get("order") {
        None | Some(Value::Null) => Order::Declared,
        Some(v) => match v.as_str() {
            Some("declared") => Order::Declared,
            Some("name") => Order::Name,
            _ => {
                err(at("order"), "expected one of: declared, name".into());
                ok = false;
                Order::Declared
            }
        },
    };
    let health = parse_health(map.get("health"), &at("health"), err, &mut ok);
    let reboot_pending = match map.get("reboot-pending") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            err(at("reboot-pending"), "expected true or false".into());
            ok = false;
            false
        }
    };
    let (name, select, max_unavailable) = (name?, select?, max_unavailable?);
    ok.then_some(Budget {
        index,
        name,
        clusters,
        select,
        max_unavailable,
        order,
        health,
        reboot_pending,
    })
}

fn is_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A list of non-empty strings, or `None` after reporting what is wrong.
fn strings(v: &Value, at: &str, err: &mut impl FnMut(String, String)) -> Option<Vec<String>> {
    let Value::Array(items) = v else {
        err(at.to_string(), "expected a list".into());
        return None;
    };
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match item.as_str() {
            Some(s) if !s.trim().is_empty() => out.push(s.to_string()),
            _ => {
                err(format!("{at}[{i}]"), "expected a non-empty string".into());
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn parse_selector(
    v: Option<&Value>,
    at: &str,
    err: &mut impl FnMut(String, String),
) -> Option<Selector> {
    let expected =
        "expected exactly one of: {tags: [..]}, {names: [glob, ..]}, {members: [name, ..]}";
    let map = match v {
        // Its members name it themselves (`metadata.budget`).
        None => return Some(Selector::Named),
        Some(Value::Null) => {
            err(
                at.to_string(),
                format!(
                    "an empty selector; {expected}, or leave `select` out for a budget whose manifests name it (metadata.budget)"
                ),
            );
            return None;
        }
        Some(Value::Object(map)) => map,
        Some(_) => {
            err(at.to_string(), expected.into());
            return None;
        }
    };
    let mut ok = true;
    for key in map.keys() {
        if !SELECTORS.contains(&key.as_str()) {
            err(
                format!("{at}.{key}"),
                format!("unknown selector; {expected}"),
            );
            ok = false;
        }
    }
    let given: Vec<&str> = SELECTORS
        .iter()
        .copied()
        .filter(|k| map.contains_key(*k))
        .collect();
    match given.as_slice() {
        [] if ok => {
            err(at.to_string(), format!("an empty selector; {expected}"));
            None
        }
        [] => None,
        [key] => {
            let list = strings(&map[*key], &format!("{at}.{key}"), err)?;
            if list.is_empty() {
                err(
                    format!("{at}.{key}"),
                    "an empty selector selects nothing; name at least one".into(),
                );
                return None;
            }
            if *key == "members"
                && let Some((i, dup)) = list
                    .iter()
                    .enumerate()
                    .find(|(i, m)| list[..*i].contains(m))
            {
                err(
                    format!("{at}.members[{i}]"),
                    format!("`{dup}` is listed twice"),
                );
                return None;
            }
            if !ok {
                return None;
            }
            Some(match *key {
                "tags" => Selector::Tags(list.into_iter().map(|t| t.to_lowercase()).collect()),
                "names" => Selector::Names(list),
                _ => Selector::Members(list),
            })
        }
        several => {
            err(
                at.to_string(),
                format!(
                    "two selectors ({}); a budget selects by one: tags, names or members",
                    several.join(", ")
                ),
            );
            None
        }
    }
}

fn parse_max_unavailable(v: &Value) -> Option<MaxUnavailable> {
    if let Some(n) = v.as_u64() {
        return u32::try_from(n).ok().map(MaxUnavailable::Count);
    }
    let text = v.as_str()?.trim();
    let number = text.strip_suffix('%')?;
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let p: u32 = number.parse().ok()?;
    (p <= 100).then_some(MaxUnavailable::Percent(p))
}

fn parse_health(
    v: Option<&Value>,
    at: &str,
    err: &mut impl FnMut(String, String),
    ok: &mut bool,
) -> Health {
    let mut health = Health::default();
    let map = match v {
        None | Some(Value::Null) => return health,
        Some(Value::Object(map)) => map,
        Some(_) => {
            err(
                at.to_string(),
                "expected a mapping with agent, uptime, timeout and tcp".into(),
            );
            *ok = false;
            return health;
        }
    };
    for (key, value) in map {
        match key.as_str() {
            "agent" => match value.as_bool() {
                Some(b) => health.agent = b,
                None => {
                    err(format!("{at}.agent"), "expected true or false".into());
                    *ok = false;
                }
            },
            "tcp" => match parse_tcp(value) {
                Ok(tcp) => health.tcp = Some(tcp),
                Err((field, why)) => {
                    err(format!("{at}.tcp{field}"), why);
                    *ok = false;
                }
            },
            "uptime" | "timeout" => {
                let d = value.as_str().and_then(crate::settings::parse_duration);
                match d {
                    Some(d) if key == "uptime" => health.uptime = d,
                    Some(d) if !d.is_zero() => health.timeout = d,
                    _ => {
                        let least = if key == "uptime" { "" } else { " above zero" };
                        err(
                            format!("{at}.{key}"),
                            format!("expected a duration{least} with a unit: 500ms, 30s or 10m"),
                        );
                        *ok = false;
                    }
                }
            }
            _ => {
                err(
                    format!("{at}.{key}"),
                    format!("unknown field; expected one of: {}", HEALTH_KEYS.join(", ")),
                );
                *ok = false;
            }
        }
    }
    health
}

/// `tcp: {port: 22, address: 192.0.2.10}` (`address` optional), or the field (`.port`) and
/// why not.
fn parse_tcp(v: &Value) -> Result<Tcp, (String, String)> {
    let Some(map) = v.as_object() else {
        return Err((
            String::new(),
            "expected a mapping {port: 22, address: 192.0.2.10}; address is optional".into(),
        ));
    };
    if let Some(key) = map.keys().find(|k| *k != "port" && *k != "address") {
        return Err((
            format!(".{key}"),
            "unknown field; expected one of: port, address".into(),
        ));
    }
    let port = map
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            (
                ".port".to_string(),
                "expected a port from 1 to 65535".to_string(),
            )
        })?;
    let address = match map.get("address") {
        None | Some(Value::Null) => None,
        Some(a) => Some(
            a.as_str()
                .and_then(|a| a.trim().parse::<std::net::IpAddr>().ok())
                .ok_or_else(|| {
                    (
                        ".address".to_string(),
                        "expected an IP address (192.0.2.10 or 2001:db8::10); leave it out to use the guest's first configured address".to_string(),
                    )
                })?,
        ),
    };
    Ok(Tcp { port, address })
}

/// Whether `name` matches the glob `pattern` (`*`: any run of characters, `?`: one).
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative matching with one backtrack point (the last `*`).
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, n, m) in [
            ("db-*", "db-1", true),
            ("db-*", "db-", true),
            ("db-*", "web-1", false),
            ("*-1", "db-1", true),
            ("d?-1", "db-1", true),
            ("d?-1", "d-1", false),
            ("*a*b", "xaxxb", true),
            ("*a*b", "xaxxbc", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("*", "", true),
        ] {
            assert_eq!(glob_matches(p, n), m, "{p} {n}");
        }
    }

    #[test]
    fn percentages_round_down_but_keep_one() {
        assert_eq!(MaxUnavailable::Percent(25).of(10), 2);
        assert_eq!(MaxUnavailable::Percent(30).of(10), 3);
        assert_eq!(MaxUnavailable::Percent(10).of(3), 1);
        assert_eq!(MaxUnavailable::Percent(0).of(10), 0);
        assert_eq!(MaxUnavailable::Percent(100).of(6), 6);
        assert_eq!(MaxUnavailable::Count(2).of(10), 2);
    }
}
