//! The distribution API calls proxops makes: manifests and blobs, pulled and pushed, with the
//! registry's own auth (a `Bearer` challenge answered by its token service, or `Basic`).

use std::sync::Mutex;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};

use crate::{
    CONFIG_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, MAX_COMPONENT_BYTES, OciError, Reference,
    WASM_MEDIA_TYPE, sha256_hex,
};

/// A user name and password (or token) for a registry. Never printed.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// `PROXOPS_REGISTRY_USERNAME` and `PROXOPS_REGISTRY_PASSWORD`, when both are set.
    pub fn from_env() -> Option<Credentials> {
        Some(Credentials {
            username: std::env::var("PROXOPS_REGISTRY_USERNAME").ok()?,
            password: std::env::var("PROXOPS_REGISTRY_PASSWORD").ok()?,
        })
    }
}

/// One registry, for one repository.
pub struct Registry {
    http: reqwest::Client,
    base: String,
    name: String,
    repository: String,
    credentials: Option<Credentials>,
    /// The `Authorization` value that worked last (a bearer token or Basic).
    auth: Mutex<Option<String>>,
}

impl Registry {
    /// A client for `reference`'s registry.
    pub fn new(
        reference: &Reference,
        credentials: Option<&Credentials>,
    ) -> Result<Registry, OciError> {
        let http = proxops_pve::https_builder(&proxops_pve::TlsMode::System)
            .map_err(|e| OciError::Tls(e.to_string()))?
            .timeout(std::time::Duration::from_secs(120))
            .build()
            .map_err(|e| OciError::Tls(e.to_string()))?;
        Ok(Registry {
            http,
            base: reference.base_url(),
            name: reference.registry.clone(),
            repository: reference.repository.clone(),
            credentials: credentials.cloned(),
            auth: Mutex::new(None),
        })
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/v2/{}/{tail}", self.base, self.repository)
    }

    /// Send the request `make` builds, answering one auth challenge.
    async fn send(
        &self,
        what: &str,
        make: &dyn Fn() -> RequestBuilder,
    ) -> Result<Response, OciError> {
        let with_auth = |r: RequestBuilder| match self.auth.lock().expect("auth").clone() {
            Some(a) => r.header(AUTHORIZATION, a),
            None => r,
        };
        let response = with_auth(make())
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let auth = self.authorize(&challenge, what).await?;
        *self.auth.lock().expect("auth") = Some(auth);
        with_auth(make())
            .send()
            .await
            .map_err(|e| self.unreachable(e))
    }

    /// The `Authorization` value for `challenge`: a token from the registry's token service
    /// (with the credentials, when given), or Basic credentials.
    async fn authorize(&self, challenge: &str, what: &str) -> Result<String, OciError> {
        let basic = self.credentials.as_ref().map(|c| {
            use base64::Engine as _;
            let pair = format!("{}:{}", c.username, c.password);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        let Some(params) = challenge.strip_prefix("Bearer ") else {
            return basic.ok_or_else(|| self.denied(what, "asks for credentials: set PROXOPS_REGISTRY_USERNAME and PROXOPS_REGISTRY_PASSWORD"));
        };
        let field = |name: &str| {
            params.split(',').find_map(|kv| {
                let (k, v) = kv.trim().split_once('=')?;
                (k == name).then(|| v.trim_matches('"').to_string())
            })
        };
        let realm = field("realm")
            .ok_or_else(|| self.denied(what, "sent a Bearer challenge without a realm"))?;
        let mut query = Vec::new();
        if let Some(service) = field("service") {
            query.push(("service", service));
        }
        if let Some(scope) = field("scope") {
            query.push(("scope", scope));
        }
        let mut request = self.http.get(&realm).query(&query);
        if let Some(b) = &basic {
            request = request.header(AUTHORIZATION, b);
        }
        let answer = request.send().await.map_err(|e| self.unreachable(e))?;
        if !answer.status().is_success() {
            return Err(self.denied(
                what,
                &format!("its token service answered {}", answer.status()),
            ));
        }
        let body: Value = answer
            .json()
            .await
            .map_err(|e| self.denied(what, &format!("its token service sent no JSON ({e})")))?;
        let token = body["token"]
            .as_str()
            .or_else(|| body["access_token"].as_str())
            .ok_or_else(|| self.denied(what, "its token service sent no token"))?;
        Ok(format!("Bearer {token}"))
    }

    fn unreachable(&self, e: reqwest::Error) -> OciError {
        // reqwest's message names the URL, never a credential (they travel in headers).
        OciError::Unreachable {
            registry: self.name.clone(),
            message: e.to_string(),
        }
    }

    fn denied(&self, what: &str, message: &str) -> OciError {
        OciError::Status {
            registry: self.name.clone(),
            status: 401,
            what: what.to_string(),
            message: message.to_string(),
        }
    }

    async fn expect_ok(&self, what: &str, response: Response) -> Result<Response, OciError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        let message: String = body.chars().take(300).collect();
        Err(OciError::Status {
            registry: self.name.clone(),
            status: status.as_u16(),
            what: what.to_string(),
            message,
        })
    }

    /// The component `reference` names: its manifest, then its one `application/wasm` layer,
    /// checked against the layer's digest.
    pub async fn pull(&self, reference: &Reference) -> Result<Vec<u8>, OciError> {
        let what = format!("the manifest of {reference}");
        let url = self.url(&format!("manifests/{}", reference.reference));
        let response = self
            .send(&what, &|| {
                self.http.get(&url).header(ACCEPT, MANIFEST_MEDIA_TYPE)
            })
            .await?;
        let manifest: Value = self
            .expect_ok(&what, response)
            .await?
            .json()
            .await
            .map_err(|e| OciError::Artifact(format!("{what} is not JSON: {e}")))?;
        let layers: Vec<&Value> = manifest["layers"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter(|l| l["mediaType"] == WASM_MEDIA_TYPE)
                    .collect()
            })
            .unwrap_or_default();
        let [layer] = layers[..] else {
            return Err(OciError::Artifact(format!(
                "{reference} is not a Wasm OCI artifact: its manifest has {} `{WASM_MEDIA_TYPE}` layers, not one",
                layers.len()
            )));
        };
        let digest = layer["digest"].as_str().unwrap_or_default();
        let Some(hex) = digest.strip_prefix("sha256:") else {
            return Err(OciError::Artifact(format!(
                "{reference}: the layer digest `{digest}` is not sha256"
            )));
        };
        if layer["size"].as_u64().unwrap_or(0) > MAX_COMPONENT_BYTES as u64 {
            return Err(OciError::Artifact(format!(
                "{reference}: the component is larger than {} MiB",
                MAX_COMPONENT_BYTES >> 20
            )));
        }
        let what = format!("the component of {reference}");
        let url = self.url(&format!("blobs/{digest}"));
        let response = self.send(&what, &|| self.http.get(&url)).await?;
        let bytes = self
            .expect_ok(&what, response)
            .await?
            .bytes()
            .await
            .map_err(|e| self.unreachable(e))?;
        if bytes.len() > MAX_COMPONENT_BYTES || sha256_hex(&bytes) != hex {
            return Err(OciError::Artifact(format!(
                "{reference}: the registry sent a layer that does not match its digest {digest}"
            )));
        }
        Ok(bytes.to_vec())
    }

    /// Upload `bytes` as a blob unless the registry has it; returns its digest.
    async fn push_blob(&self, bytes: &[u8]) -> Result<String, OciError> {
        let digest = format!("sha256:{}", sha256_hex(bytes));
        let what = format!("the blob {digest}");
        let head_url = self.url(&format!("blobs/{digest}"));
        let head = self.send(&what, &|| self.http.head(&head_url)).await?;
        if head.status().is_success() {
            return Ok(digest);
        }
        let start_url = self.url("blobs/uploads/");
        let started = self.send(&what, &|| self.http.post(&start_url)).await?;
        let started = self.expect_ok(&what, started).await?;
        let location = started
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                OciError::Artifact(format!("{}: an upload without a Location", self.name))
            })?
            .to_string();
        let location = if location.starts_with('/') {
            format!("{}{location}", self.base)
        } else {
            location
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put_url = format!("{location}{sep}digest={digest}");
        let body = bytes.to_vec();
        let put = self
            .send(&what, &|| {
                self.http
                    .request(Method::PUT, &put_url)
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(body.clone())
            })
            .await?;
        self.expect_ok(&what, put).await?;
        Ok(digest)
    }

    /// Publish `wasm` at `reference` as a Wasm OCI artifact; returns the manifest's digest.
    pub async fn push(&self, reference: &Reference, wasm: &[u8]) -> Result<String, OciError> {
        let layer = self.push_blob(wasm).await?;
        let config = serde_json::to_vec(&json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer],
        }))
        .expect("JSON");
        let config_digest = self.push_blob(&config).await?;
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": WASM_MEDIA_TYPE, "digest": layer, "size": wasm.len()}],
        }))
        .expect("JSON");
        let what = format!("the manifest of {reference}");
        let url = self.url(&format!("manifests/{}", reference.reference));
        let put = self
            .send(&what, &|| {
                self.http
                    .request(Method::PUT, &url)
                    .header(CONTENT_TYPE, MANIFEST_MEDIA_TYPE)
                    .body(manifest.clone())
            })
            .await?;
        self.expect_ok(&what, put).await?;
        Ok(format!("sha256:{}", sha256_hex(&manifest)))
    }
}
