//! SHA-1 and MD5, written out because PVE's config digest is SHA-1 and download-url accepts md5/sha1 checksums.

/// An incremental hasher over one of the algorithms download-url accepts.
pub(crate) enum Hasher {
    Md5(Md5),
    Sha1(Sha1),
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
            "md5" => Some(Hasher::Md5(Md5::new())),
            "sha1" => Some(Hasher::Sha1(Sha1::new())),
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
            Hasher::Md5(h) => hex::encode(h.finish()),
            Hasher::Sha1(h) => hex::encode(h.finish()),
            Hasher::Sha224(h) => hex::encode(h.finalize()),
            Hasher::Sha256(h) => hex::encode(h.finalize()),
            Hasher::Sha384(h) => hex::encode(h.finalize()),
            Hasher::Sha512(h) => hex::encode(h.finalize()),
        }
    }
}

/// SHA-1 hex digest of `data`.
pub(crate) fn sha1_hex(data: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(data);
    hex::encode(h.finish())
}

/// Buffers input into 64-byte blocks and produces the padded tail shared by MD5 and SHA-1.
struct BlockBuffer {
    buf: Vec<u8>,
    len: u64,
}

impl BlockBuffer {
    fn new() -> BlockBuffer {
        BlockBuffer {
            buf: Vec::with_capacity(64),
            len: 0,
        }
    }

    fn push(&mut self, data: &[u8], mut block: impl FnMut(&[u8; 64])) {
        self.len += data.len() as u64;
        let mut rest = data;
        if !self.buf.is_empty() {
            let take = (64 - self.buf.len()).min(rest.len());
            self.buf.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.buf.len() == 64 {
                let mut b = [0u8; 64];
                b.copy_from_slice(&self.buf);
                block(&b);
                self.buf.clear();
            }
        }
        while rest.len() >= 64 {
            let mut b = [0u8; 64];
            b.copy_from_slice(&rest[..64]);
            block(&b);
            rest = &rest[64..];
        }
        self.buf.extend_from_slice(rest);
    }

    /// The final one or two padded blocks; `big_endian` selects how the bit length is written.
    fn tail(&self, big_endian: bool) -> Vec<[u8; 64]> {
        let mut t = self.buf.clone();
        t.push(0x80);
        while t.len() % 64 != 56 {
            t.push(0);
        }
        let bits = self.len.wrapping_mul(8);
        if big_endian {
            t.extend_from_slice(&bits.to_be_bytes());
        } else {
            t.extend_from_slice(&bits.to_le_bytes());
        }
        t.chunks(64)
            .map(|c| {
                let mut b = [0u8; 64];
                b.copy_from_slice(c);
                b
            })
            .collect()
    }
}

/// SHA-1 (FIPS 180-4).
pub(crate) struct Sha1 {
    h: [u32; 5],
    buffer: BlockBuffer,
}

impl Sha1 {
    pub(crate) fn new() -> Sha1 {
        Sha1 {
            h: [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0],
            buffer: BlockBuffer::new(),
        }
    }

    fn compress(h: &mut [u32; 5], block: &[u8; 64]) {
        let mut w = [0u32; 80];
        for (i, word) in w.iter_mut().enumerate().take(16) {
            *word = u32::from_be_bytes([
                block[i * 4],
                block[i * 4 + 1],
                block[i * 4 + 2],
                block[i * 4 + 3],
            ]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = *h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let temp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = temp;
        }
        h[0] = h[0].wrapping_add(a);
        h[1] = h[1].wrapping_add(b);
        h[2] = h[2].wrapping_add(c);
        h[3] = h[3].wrapping_add(d);
        h[4] = h[4].wrapping_add(e);
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        let h = &mut self.h;
        self.buffer.push(data, |b| Sha1::compress(h, b));
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        for b in self.buffer.tail(true) {
            Sha1::compress(&mut self.h, &b);
        }
        self.h.iter().flat_map(|x| x.to_be_bytes()).collect()
    }
}

/// MD5 (RFC 1321).
pub(crate) struct Md5 {
    s: [u32; 4],
    buffer: BlockBuffer,
}

const MD5_SHIFT: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

impl Md5 {
    pub(crate) fn new() -> Md5 {
        Md5 {
            s: [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476],
            buffer: BlockBuffer::new(),
        }
    }

    fn compress(s: &mut [u32; 4], block: &[u8; 64]) {
        let mut m = [0u32; 16];
        for (i, word) in m.iter_mut().enumerate() {
            *word = u32::from_le_bytes([
                block[i * 4],
                block[i * 4 + 1],
                block[i * 4 + 2],
                block[i * 4 + 3],
            ]);
        }
        let [mut a, mut b, mut c, mut d] = *s;
        for (i, shift) in MD5_SHIFT.iter().enumerate() {
            let (f, g) = match i {
                0..=15 => ((b & c) | (!b & d), i),
                16..=31 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                32..=47 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            // K[i] = floor(abs(sin(i + 1)) * 2^32)
            let k = ((i as f64 + 1.0).sin().abs() * 4294967296.0) as u32;
            let f = f.wrapping_add(a).wrapping_add(k).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(*shift));
        }
        s[0] = s[0].wrapping_add(a);
        s[1] = s[1].wrapping_add(b);
        s[2] = s[2].wrapping_add(c);
        s[3] = s[3].wrapping_add(d);
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        let s = &mut self.s;
        self.buffer.push(data, |b| Md5::compress(s, b));
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        for b in self.buffer.tail(false) {
            Md5::compress(&mut self.s, &b);
        }
        self.s.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
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
        let mut m = Md5::new();
        m.update(b"abc");
        assert_eq!(hex::encode(m.finish()), "900150983cd24fb0d6963f7d28e17f72");
        let mut m = Md5::new();
        m.update(b"");
        assert_eq!(hex::encode(m.finish()), "d41d8cd98f00b204e9800998ecf8427e");
    }
}
