//! The MCP surface driven by the official MCP Python SDK (`tests/mcp_client.py`): over
//! stdio against the built `mnemos mcp` binary, and over streamable HTTP against `/mcp`
//! of a spawned server. Needs `pip install mcp`; without it the tests say SKIPPED
//! (under `CI` they fail).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use mnemos::app::Services;
use reqwest::StatusCode;

use crate::helpers::{spawn_app, spawn_with_keys, test_settings, KeySpec, SERVER_ADMIN};

/// The client script.
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");

/// Whether the Python SDK is importable; when it is not, fail under CI or say SKIPPED.
async fn sdk_available(test: &str) -> bool {
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .output()
        .await;
    if probe.is_ok_and(|output| output.status.success()) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must install the MCP Python SDK (python3 -m pip install mcp); `python3 -c \"import mcp\"` failed"
    );
    crate::helpers::skipped(test, "pip install mcp");
    false
}

/// Run the client script with these arguments and extra environment, within two minutes.
async fn run_client(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new("python3");
    command.arg(CLIENT).args(args).kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the MCP client finishes within two minutes")
        .expect("python3 runs")
}

/// Assert the script passed, showing everything it printed when it did not.
fn assert_passed(output: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/mcp_client.py failed ({})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    let summary: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("summary is not JSON ({e}): {stdout}\n--- stderr\n{stderr}"));
    assert_eq!(summary["ok"], true, "{summary}");
    assert_eq!(
        summary["tools"].as_array().map(Vec::len),
        Some(28),
        "{summary}"
    );
    assert_eq!(summary["errors"][0]["data"]["field"], "query", "{summary}");
    summary
}

/// Memories stored in a data directory (opening it also proves the lock was released).
async fn stored_memories(data_dir: &Path) -> u64 {
    let services = Services::open(&test_settings(data_dir))
        .await
        .expect("the data directory opens after the MCP server exited");
    let count = services.runtime.count().await.expect("count");
    services.close().await.expect("close");
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_uses_every_tool_over_stdio() {
    if !sdk_available("the_python_sdk_uses_every_tool_over_stdio").await {
        return;
    }
    let temp = tempfile::tempdir().expect("temp dir");
    let data_dir = temp.path().to_string_lossy().to_string();
    // On PostgreSQL the child uses the same schema that `stored_memories` opens.
    let backend = crate::helpers::backend_env(temp.path());
    let mut env = vec![
        ("MNEMOS__DATA_DIR", data_dir.as_str()),
        ("MNEMOS__COGNITION__ENABLED", "false"),
        ("MNEMOS__LOG__LEVEL", "warn"),
    ];
    env.extend(backend.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // `mnemos mcp --agent` is the connection's agent: the script leaves agent_id out.
    env.push(("MNEMOS_DEFAULT_AGENT", "mcp-client"));
    let output = run_client(
        &[
            "stdio",
            env!("CARGO_BIN_EXE_mnemos"),
            "mcp",
            "--agent",
            "mcp-client",
        ],
        &env,
    )
    .await;
    let summary = assert_passed(&output);
    assert_eq!(summary["transport"], "stdio");
    // The server exited when stdin closed, flushed its stores and released the lock:
    // both remembered, both batch memories (one archived by forget, still stored), and
    // the preference and the procedure extract_turn kept (once, though the turn was sent
    // twice); the memory of the isolated project was deleted by delete_memory; and the
    // three memories of the entities and facts tools (agent mcp-facts).
    assert_eq!(stored_memories(temp.path()).await, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_uses_every_tool_over_streamable_http() {
    if !sdk_available("the_python_sdk_uses_every_tool_over_streamable_http").await {
        return;
    }
    let app = spawn_app().await;
    // The URL names the connection's agent: the script leaves agent_id out.
    let url = format!("{}/mcp?agent_id=mcp-client", app.address);
    let output = run_client(&["http", &url], &[("MNEMOS_DEFAULT_AGENT", "mcp-client")]).await;
    let summary = assert_passed(&output);
    assert_eq!(summary["transport"], "http");
    // The SDK ended its session with DELETE and took the answer (204) as a success.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("Session termination failed"),
        "the SDK logged a failed session end:\n{stderr}"
    );
    // The MCP calls went to the same runtime the REST routes use.
    let recalled = app
        .recall("mcp-client", "green tea", serde_json::json!({}))
        .await;
    assert!(
        recalled["results"][0]["memory"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("green tea")),
        "{recalled}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_refuses_a_foreign_host() {
    let app = spawn_app().await;
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "0"}}
    });
    let response = app
        .client
        .post(format!("{}/mcp", app.address))
        .header("host", "attacker.example")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = app
        .client
        .post(format!("{}/mcp", app.address))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), StatusCode::OK);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stdio_writes_only_protocol_to_stdout_and_exits_when_stdin_closes() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let temp = tempfile::tempdir().expect("temp dir");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mnemos"))
        .arg("mcp")
        .env("MNEMOS__DATA_DIR", temp.path())
        .envs(crate::helpers::backend_env(temp.path()))
        .env("MNEMOS__COGNITION__ENABLED", "false")
        .env("MNEMOS__LOG__LEVEL", "debug")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("mnemos mcp starts");
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"remember","arguments":{"agent_id":"raw","content":"stdout stays clean"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#,
    ];
    // Drain stderr while the session runs: debug logs fill a pipe nobody reads, and a
    // server blocked on writing its logs answers nothing.
    let mut errors = child.stderr.take().expect("stderr piped");
    let logs = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut logs = Vec::new();
        let _ = errors.read_to_end(&mut logs).await;
        logs
    });
    let mut stdin = child.stdin.take().expect("stdin piped");
    for request in requests {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .expect("write request");
    }
    // Read answers until the last request is answered, then close stdin: the end of the session.
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let mut stdout = String::new();
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            stdout.push_str(&line);
            stdout.push('\n');
            if line.contains(r#""id":4"#) {
                break;
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "no answer to every request; stdout so far:\n{stdout}"
    );
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("mnemos mcp exits after stdin closes")
        .expect("output");
    while let Ok(Some(line)) = lines.next_line().await {
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let logs = logs.await.unwrap_or_default();
    let stderr = String::from_utf8_lossy(&logs);
    assert!(
        output.status.success(),
        "exit {}; stderr:\n{stderr}",
        output.status
    );
    let messages: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON-RPC ({e}): {line:?}"))
        })
        .collect();
    assert!(
        messages.iter().all(|m| m["jsonrpc"] == "2.0"),
        "{messages:?}"
    );
    let by_id = |id: u64| messages.iter().find(|m| m["id"] == id).cloned();
    assert_eq!(
        by_id(2).map(|m| m["result"]["tools"].as_array().map(Vec::len)),
        Some(Some(28))
    );
    let stored = by_id(3).unwrap_or_default();
    assert_eq!(
        stored["result"]["structuredContent"]["memory"]["content"], "stdout stays clean",
        "{stored}"
    );
    let unknown = by_id(4).unwrap_or_default();
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(
        unknown["error"]["data"]["code"], "invalid_argument",
        "{unknown}"
    );
    assert_eq!(unknown["error"]["data"]["field"], "name", "{unknown}");
    // Logs went to stderr, and the stores were flushed on the way out.
    assert!(!stderr.is_empty());
    assert_eq!(stored_memories(temp.path()).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_the_python_sdk_sends_its_key_and_acts_in_its_tenant() {
    let test = "with_keys_the_python_sdk_sends_its_key_and_acts_in_its_tenant";
    if !sdk_available(test).await {
        return;
    }
    use mnemos::auth::Scope;
    // The app's own requests carry the first key: the default tenant's admin.
    let (app, secrets) = spawn_with_keys(&[
        SERVER_ADMIN,
        KeySpec {
            tenant: "acme",
            agent: None,
            scopes: &[Scope::Read, Scope::Write],
            expires_at: None,
            revoked: false,
        },
    ])
    .await;
    let url = format!("{}/mcp", app.address);
    let output = run_client(&["http", &url], &[("MNEMOS_KEY", secrets[1].as_str())]).await;
    let summary = assert_passed(&output);
    assert_eq!(summary["transport"], "http");
    // What the tools wrote is acme's: its key finds it, the default tenant's admin
    // (another tenant) does not.
    let mut acme = app
        .recall("mcp-client", "green tea", serde_json::json!({}))
        .await;
    assert_eq!(acme["results"].as_array().map(Vec::len), Some(0), "{acme}");
    let response = app
        .send_as(
            Some(&format!("Bearer {}", secrets[1])),
            reqwest::Method::POST,
            "/tools/recall",
            Some(&serde_json::json!({"agent_id": "mcp-client", "query": "green tea"})),
        )
        .await;
    acme = response.json().await.unwrap();
    assert!(acme.to_string().contains("green tea"), "{acme}");
    // Without the key the SDK's session cannot even start.
    let refused = run_client(&["http", &url], &[]).await;
    assert!(!refused.status.success());
}
