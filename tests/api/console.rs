//! The web console (`/ui/`): its files are served without a key with the security
//! headers, and a real headless Chromium (Debian's `chromium`, driven by playwright-core
//! from `tests/console`) signs in with a key and uses every page against a live server
//! (`tests/console/console.test.mjs`), writing a screenshot of each into `docs/console/`.
//! Without Chromium, Node.js or `npm ci` in `tests/console` the browser test says
//! SKIPPED (under `CI` it fails).

use std::path::Path;

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::{skipped, spawn_with_keys, SERVER_ADMIN};

#[tokio::test]
async fn the_console_is_served_without_a_key_with_its_security_headers() {
    let (app, _secrets) = spawn_with_keys(&[SERVER_ADMIN]).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let root = client
        .get(format!("{}/", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(root.headers()["location"], "/ui/");
    let page = client
        .get(format!("{}/ui/", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let headers = page.headers().clone();
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let etag = headers["etag"].clone();
    let html = page.text().await.unwrap();
    assert!(html.contains("app.js"), "{html}");
    // Revalidation answers 304; a module has its JavaScript type.
    let again = client
        .get(format!("{}/ui/", app.address))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let script = client
        .get(format!("{}/ui/app.js", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    assert!(script.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    for missing in ["/ui/nope.js", "/ui/..%2FCargo.toml", "/ui/.hidden"] {
        let response = client
            .get(format!("{}{missing}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{missing}");
    }
    // The data behind it still needs the key.
    let data = client
        .get(format!("{}/v1/agents", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(data.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
}

/// Whether the browser test can run here: Chromium, Node.js and `npm ci` in
/// `tests/console`. When not, fail under CI or say SKIPPED.
async fn browser_available(test: &str) -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let node = tokio::process::Command::new("node")
        .arg("--version")
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    let installed = root
        .join("tests/console/node_modules/playwright-core")
        .is_dir();
    if node && installed && Path::new(&chromium).exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must install Chromium (apt-get install chromium) and the browser test's packages (cd tests/console && npm ci)"
    );
    skipped(
        test,
        "apt-get install chromium, then cd tests/console && npm ci (Node.js 20)",
    );
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_uses_every_page_of_the_console_in_a_real_browser() {
    let test = "a_person_uses_every_page_of_the_console_in_a_real_browser";
    if !browser_available(test).await {
        return;
    }
    let (app, secrets) = spawn_with_keys(&[SERVER_ADMIN]).await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        tokio::process::Command::new("node")
            .arg(root.join("tests/console/console.test.mjs"))
            .env("MNEMOS_URL", &app.address)
            .env("MNEMOS_API_KEY", &secrets[0])
            .env("SCREENSHOT_DIR", root.join("docs/console"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser test finishes within ten minutes")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/console/console.test.mjs failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .expect("a JSON summary line");
    assert_eq!(summary["ok"], true, "{summary}");
    println!("console timings: {}", summary["timings"]);
    app.stop().await;
}
