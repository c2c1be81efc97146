//! PVE task ids: `UPID:node:pid:pstart:starttime:type:id:user:` (hex fields).

/// A parsed UPID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upid {
    pub raw: String,
    pub node: String,
    pub task_type: String,
    pub id: String,
}

impl Upid {
    /// Parse a UPID; `None` when the text is not one.
    pub fn parse(raw: &str) -> Option<Upid> {
        let parts: Vec<&str> = raw.split(':').collect();
        if parts.len() < 9 || parts[0] != "UPID" || parts[1].is_empty() {
            return None;
        }
        Some(Upid {
            raw: raw.to_string(),
            node: parts[1].to_string(),
            task_type: parts[5].to_string(),
            id: parts[6].to_string(),
        })
    }
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    pub upid: String,
    /// `OK` or `WARNINGS: n`.
    pub exitstatus: String,
}

#[cfg(test)]
mod tests {
    use super::Upid;

    #[test]
    fn parses_pve_upids() {
        let u = Upid::parse("UPID:pve01:000A1B2C:0012D687:6740F0A1:qmcreate:100:root@pam!proxops:")
            .unwrap();
        assert_eq!(
            (u.node.as_str(), u.task_type.as_str(), u.id.as_str()),
            ("pve01", "qmcreate", "100")
        );
        assert_eq!(Upid::parse("not a upid"), None);
        assert_eq!(Upid::parse("UPID::1:2:3:4:5:6:"), None);
    }
}
