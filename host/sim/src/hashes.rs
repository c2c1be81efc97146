//! The digests the simulator computes: SHA-1 for PVE's config digest, and the checksum
//! algorithms download-url accepts (md5, sha1, sha224 to sha512), all from RustCrypto.

/// An incremental hasher over one of the algorithms download-url accepts.
pub(crate) enum Hasher {
    Md5(md5::Md5),
    Sha1(sha1::Sha1),
    Sha224(sha2::Sha224),
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
}

impl Hasher {
    /// A hasher for the algorithm name PVE uses (`md5`, `sha1`, `sha224`, ...).
    pub(crate) fn new(algorithm: &str) -> Option<Hasher> {
        use sha2::Digest;
        match algorithm {
            "md5" => Some(Hasher::Md5(md5::Md5::new())),
            "sha1" => Some(Hasher::Sha1(sha1::Sha1::new())),
            "sha224" => Some(Hasher::Sha224(sha2::Sha224::new())),
            "sha256" => Some(Hasher::Sha256(sha2::Sha256::new())),
            "sha384" => Some(Hasher::Sha384(sha2::Sha384::new())),
            "sha512" => Some(Hasher::Sha512(sha2::Sha512::new())),
            _ => None,
        }
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        use sha2::Digest;
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha224(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha384(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    /// Lower-case hex digest.
    pub(crate) fn finish_hex(self) -> String {
        use sha2::Digest;
        match self {
            Hasher::Md5(h) => hex::encode(h.finalize()),
            Hasher::Sha1(h) => hex::encode(h.finalize()),
            Hasher::Sha224(h) => hex::encode(h.finalize()),
            Hasher::Sha256(h) => hex::encode(h.finalize()),
            Hasher::Sha384(h) => hex::encode(h.finalize()),
            Hasher::Sha512(h) => hex::encode(h.finalize()),
        }
    }
}

/// SHA-1 hex digest of `data`.
pub(crate) fn sha1_hex(data: &[u8]) -> String {
    use sha1::Digest;
    hex::encode(sha1::Sha1::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let long = vec![b'a'; 1000];
        assert_eq!(sha1_hex(&long), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
        let md5 = |data: &[u8]| {
            let mut h = Hasher::new("md5").expect("md5 is known");
            h.update(data);
            h.finish_hex()
        };
        assert_eq!(md5(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(md5(b""), "d41d8cd98f00b204e9800998ecf8427e");
        // In pieces, as download-url hashes a body chunk by chunk.
        let mut h = Hasher::new("sha1").expect("sha1 is known");
        for chunk in long.chunks(77) {
            h.update(chunk);
        }
        assert_eq!(h.finish_hex(), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
    }
}
