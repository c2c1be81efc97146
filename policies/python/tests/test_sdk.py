"""The Python SDK's helpers, on the cases the Rust SDK's tests use (policies/sdk/src/size.rs,
doc.rs, findings.rs), so that a policy ported between the languages reads manifests alike.
Run with the bindings componentize-py generates (tests/e2e/foreign_policies.rs does):
    componentize-py -d wit/common/0.1.0 -d wit/policy/0.1.0 -w proxops:policy/policy bindings OUT
    PYTHONPATH=OUT:policies/python python3 -m unittest discover -s policies/python/tests
"""

import unittest

from proxops_policy import Doc, Findings, checker, format_size, object_path, parse_size


class Sizes(unittest.TestCase):
    def test_sizes(self):
        cases = [
            ("8GiB", 8 << 30), ("512MiB", 512 << 20), ("1.5GiB", 3 << 29),
            (" 2 TiB ", 2 << 40), ("4096B", 4096), ("1.3B", None), ("8GB", None),
            ("GiB", None), ("-1GiB", None), ("8", None), ("99999999999999999999TiB", None),
        ]
        for text, want in cases:
            try:
                got = parse_size(text)
            except ValueError:
                got = None
            self.assertEqual(got, want, text)
        self.assertEqual(format_size(3 << 29), "1536MiB")
        self.assertEqual(format_size(16 << 30), "16GiB")
        self.assertEqual(format_size(0), "0B")


class Docs(unittest.TestCase):
    def test_reads_paths(self):
        d = Doc({
            "kind": "VM",
            "metadata": {"name": "web", "annotations": {"proxops.io/approve": "ticket-1"}},
            "spec": {"tags": ["Prod"], "memory": "2GiB", "cpu": {"cores": "4"},
                     "networks": [{"bridge": "vmbr0"}, {"bridge": "vmbr1", "vlan": 30}],
                     "options": {"protection": True}},
        })
        self.assertEqual(d.kind(), "VM")
        self.assertEqual(d.name(), "web")
        self.assertEqual(d.str_at("spec.networks[1].bridge"), "vmbr1")
        self.assertEqual(d.u64_at("spec.networks[1].vlan"), 30)
        self.assertEqual(d.u64_at("spec.cpu.cores"), 4)
        self.assertIsNone(d.get("spec.networks[2]"))
        self.assertEqual(d.bool_at("spec.options.protection"), True)
        self.assertEqual(d.tags(), ["prod"])
        self.assertEqual(d.annotation("proxops.io/approve"), "ticket-1")
        self.assertIsNone(d.label("x"))
        self.assertEqual(len(d.list_at("spec.networks")), 2)
        self.assertIsNone(Doc.parse("not json").kind())


class Verdicts(unittest.TestCase):
    def test_verdict_follows_the_worst_finding(self):
        f = Findings()
        self.assertIsInstance(f.verdict(), checker.Verdict_Allow)
        f.warn("a", "w")
        self.assertIsInstance(f.verdict(), checker.Verdict_Warn)
        f.deny("b", "d")
        v = f.verdict()
        self.assertIsInstance(v, checker.Verdict_Deny)
        self.assertEqual([x.path for x in v.value], ["b"])

    def test_object_paths(self):
        self.assertEqual(object_path("VM", "web-01"), "VM/web-01")
        self.assertEqual(object_path("VM", "web-01", "net0"), "VM/web-01:net0")


if __name__ == "__main__":
    unittest.main()
