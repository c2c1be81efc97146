//! Set comparison for values whose order and duplicates carry no meaning (tags, name servers,
//! hotplug features): normalise, compare, and list what is only on one side.

use std::collections::BTreeSet;

/// Sorted, de-duplicated copy of `items`.
pub fn normalize<T: Ord + Clone>(items: &[T]) -> Vec<T> {
    items
        .iter()
        .cloned()
        .collect::<BTreeSet<T>>()
        .into_iter()
        .collect()
}

/// Whether `a` and `b` hold the same elements, ignoring order and duplicates.
pub fn same<T: Ord>(a: &[T], b: &[T]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

/// What differs between two sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDiff<T> {
    /// In the left set only (sorted).
    pub only_left: Vec<T>,
    /// In the right set only (sorted).
    pub only_right: Vec<T>,
}

impl<T> SetDiff<T> {
    /// Both sides hold the same elements.
    pub fn is_empty(&self) -> bool {
        self.only_left.is_empty() && self.only_right.is_empty()
    }
}

/// Compare two collections as sets.
pub fn diff<T: Ord + Clone>(left: &[T], right: &[T]) -> SetDiff<T> {
    let l: BTreeSet<&T> = left.iter().collect();
    let r: BTreeSet<&T> = right.iter().collect();
    SetDiff {
        only_left: l.difference(&r).map(|x| (*x).clone()).collect(),
        only_right: r.difference(&l).map(|x| (*x).clone()).collect(),
    }
}

/// Split a list written with any of `separators`, dropping empty parts (PVE's `split_list`
/// accepts `,`, `;` and whitespace for tags).
pub fn split_list(s: &str, separators: &[char]) -> Vec<String> {
    let any_space = separators.contains(&' ');
    s.split(|c: char| separators.contains(&c) || (any_space && c.is_whitespace()))
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The items of the duplicate entries in `items`, in first-seen order (each reported once).
pub fn duplicates<T: Ord + Clone>(items: &[T]) -> Vec<T> {
    let mut seen = BTreeSet::new();
    let mut dup = BTreeSet::new();
    let mut out = Vec::new();
    for x in items {
        if !seen.insert(x) && dup.insert(x) {
            out.push(x.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        left: &[&str],
        right: &[&str],
        expected_same: bool,
        only_left: &[&str],
        only_right: &[&str],
    ) {
        assert_eq!(same(left, right), expected_same, "{left:?} vs {right:?}");
        let d = diff(left, right);
        assert_eq!(d.only_left, only_left, "only_left {left:?} vs {right:?}");
        assert_eq!(d.only_right, only_right, "only_right {left:?} vs {right:?}");
        assert_eq!(d.is_empty(), expected_same);
    }

    #[test]
    fn comparisons() {
        check(&["a", "b"], &["b", "a"], true, &[], &[]);
        check(&["a", "a", "b"], &["b", "a"], true, &[], &[]);
        check(&[], &[], true, &[], &[]);
        check(&["a"], &[], false, &["a"], &[]);
        check(&["a", "c"], &["b", "c"], false, &["a"], &["b"]);
        check(
            &["1.1.1.1", "8.8.8.8"],
            &["8.8.8.8", "1.1.1.1", "8.8.8.8"],
            true,
            &[],
            &[],
        );
    }

    #[test]
    fn splitting() {
        for (input, seps, want) in [
            (
                "db;prod;web",
                &[';', ',', ' '][..],
                &["db", "prod", "web"][..],
            ),
            (
                "web,Prod db",
                &[';', ',', ' '][..],
                &["web", "Prod", "db"][..],
            ),
            ("a;;b;", &[';'][..], &["a", "b"][..]),
            ("", &[';'][..], &[][..]),
            (
                "1.1.1.1  8.8.8.8",
                &[' ', ','][..],
                &["1.1.1.1", "8.8.8.8"][..],
            ),
        ] {
            assert_eq!(split_list(input, seps), want, "split {input:?}");
        }
    }

    #[test]
    fn normalising_and_duplicates() {
        assert_eq!(normalize(&["b", "a", "b"]), vec!["a", "b"]);
        assert_eq!(duplicates(&["a", "b", "a", "a", "c", "b"]), vec!["a", "b"]);
        assert!(duplicates::<u32>(&[1, 2, 3]).is_empty());
    }
}
