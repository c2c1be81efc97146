//! The sops value cipher: `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`, AES-256-GCM with a 32-byte IV.

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

/// AES-256-GCM with the 256-bit nonce sops uses (`cipher.NewGCMWithNonceSize(c, 32)`).
type SopsGcm = AesGcm<Aes256, U32>;

const PREFIX: &str = "ENC[AES256_GCM,data:";
const TAG_LEN: usize = 16;
const IV_LEN: usize = 32;

/// A parsed encrypted value. Nothing in it is secret.
pub(crate) struct Encrypted {
    data: Vec<u8>,
    iv: Vec<u8>,
    tag: Vec<u8>,
    pub(crate) kind: String,
}

/// Why a value could not be read or decrypted; never holds plaintext.
#[derive(Debug)]
pub(crate) enum CipherError {
    /// Not in `ENC[AES256_GCM,…]` form, or bad base64, or an IV length sops never writes.
    Format(&'static str),
    /// GCM authentication failed: wrong key, tampered data, or the value was moved to another path.
    Authentication,
}

/// Whether a string looks like a sops-encrypted value.
pub(crate) fn looks_encrypted(s: &str) -> bool {
    s.starts_with(PREFIX)
}

impl Encrypted {
    /// Parses `ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<type>]`.
    pub(crate) fn parse(s: &str) -> Result<Encrypted, CipherError> {
        let body = s
            .strip_prefix(PREFIX)
            .and_then(|b| b.strip_suffix(']'))
            .ok_or(CipherError::Format("not in ENC[AES256_GCM,...] form"))?;
        let (data, rest) = body
            .split_once(",iv:")
            .ok_or(CipherError::Format("no iv field"))?;
        let (iv, rest) = rest
            .split_once(",tag:")
            .ok_or(CipherError::Format("no tag field"))?;
        let (tag, kind) = rest
            .split_once(",type:")
            .ok_or(CipherError::Format("no type field"))?;
        let decode = |field: &str, what: &'static str| {
            STANDARD
                .decode(field)
                .map_err(|_| CipherError::Format(what))
        };
        let enc = Encrypted {
            data: decode(data, "data is not base64")?,
            iv: decode(iv, "iv is not base64")?,
            tag: decode(tag, "tag is not base64")?,
            kind: kind.to_owned(),
        };
        if enc.iv.len() != IV_LEN {
            return Err(CipherError::Format("iv is not 32 bytes long"));
        }
        if enc.tag.len() != TAG_LEN {
            return Err(CipherError::Format("tag is not 16 bytes long"));
        }
        Ok(enc)
    }

    /// Decrypts with the data key; `aad` is the sops path string (`a:b:c:`) or `lastmodified` for the MAC.
    pub(crate) fn decrypt(
        &self,
        key: &[u8; 32],
        aad: &str,
    ) -> Result<Zeroizing<Vec<u8>>, CipherError> {
        let cipher = SopsGcm::new(key.into());
        let mut msg = Vec::with_capacity(self.data.len() + TAG_LEN);
        msg.extend_from_slice(&self.data);
        msg.extend_from_slice(&self.tag);
        let plain = cipher
            .decrypt(
                Nonce::<U32>::from_slice(&self.iv),
                Payload {
                    msg: &msg,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| CipherError::Authentication)?;
        Ok(Zeroizing::new(plain))
    }
}

/// Encrypts `plain` as sops does for a new value: a fresh random 32-byte IV, `aad` the key
/// path (`a:b:c:`) or, for the MAC, the `lastmodified` timestamp.
pub(crate) fn encrypt(key: &[u8; 32], plain: &str, aad: &str, kind: &str) -> String {
    encrypt_with_iv(key, &rand::random::<[u8; IV_LEN]>(), plain, aad, kind)
}

/// [`encrypt`] with a given IV (tests use fixed ones).
pub(crate) fn encrypt_with_iv(
    key: &[u8; 32],
    iv: &[u8; 32],
    plain: &str,
    aad: &str,
    kind: &str,
) -> String {
    let cipher = SopsGcm::new(key.into());
    let out = cipher
        .encrypt(
            Nonce::<U32>::from_slice(iv),
            Payload {
                msg: plain.as_bytes(),
                aad: aad.as_bytes(),
            },
        )
        .expect("AES-GCM encryption of a message this small cannot fail");
    let (data, tag) = out.split_at(out.len() - TAG_LEN);
    format!(
        "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{kind}]",
        STANDARD.encode(data),
        STANDARD.encode(iv),
        STANDARD.encode(tag)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_binds_the_path() {
        let key = [7u8; 32];
        let enc = encrypt_with_iv(&key, &[1u8; 32], "hunter2", "a:b:", "str");
        let parsed = Encrypted::parse(&enc).unwrap();
        assert_eq!(parsed.kind, "str");
        assert_eq!(&*parsed.decrypt(&key, "a:b:").unwrap(), b"hunter2");
        assert!(matches!(
            parsed.decrypt(&key, "a:c:"),
            Err(CipherError::Authentication)
        ));
        assert!(matches!(
            parsed.decrypt(&[8u8; 32], "a:b:"),
            Err(CipherError::Authentication)
        ));
    }

    #[test]
    fn malformed_values_are_format_errors() {
        for s in [
            "ENC[AES256_GCM,data:abc",
            "ENC[AES256_GCM,data:!!,iv:AAAA,tag:AAAA,type:str]",
            "ENC[AES256_GCM,data:AAAA,iv:AAAA,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]",
            "ENC[AES256_GCM,data:AAAA,type:str]",
        ] {
            assert!(
                matches!(Encrypted::parse(s), Err(CipherError::Format(_))),
                "{s}"
            );
        }
    }
}
