//! The PostgreSQL system of record at the edges: a clear start error when the server is
//! unreachable, and `backend_unavailable` (503, never a 500 or a panic) while the
//! connection is lost, with recovery once it is back.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::helpers::{
    assert_error, assert_status, eventually, postgres_base_url, skipped, spawn_with, test_settings,
    try_spawn_with,
};

#[tokio::test]
async fn an_unreachable_postgres_is_a_start_error_naming_storage_url() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.storage.backend = "postgres".into();
    settings.storage.url = "postgres://postgres:secret@127.0.0.1:1/test".into();
    let error = match try_spawn_with(settings, None).await {
        Ok(_) => panic!("a server with an unreachable database must not start"),
        Err(error) => format!("{error:#}"),
    };
    assert!(error.contains("storage.url"), "{error}");
    assert!(error.contains("127.0.0.1:1"), "{error}");
    assert!(!error.contains("secret"), "the password leaked: {error}");
}

/// A TCP forwarder between the server and PostgreSQL that can cut every connection
/// and refuse new ones (the database "goes away"), then come back on the same port.
struct Proxy {
    address: SocketAddr,
    target: SocketAddr,
    accept: Option<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let mut proxy = Self {
            address: listener.local_addr().expect("proxy address"),
            target,
            accept: None,
            connections: Arc::default(),
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&mut self, listener: TcpListener) {
        let target = self.target;
        let connections = self.connections.clone();
        self.accept = Some(tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let forward = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                connections.lock().expect("lock").push(forward);
            }
        }));
    }

    /// Cut every forwarded connection and stop listening.
    fn cut(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
        for connection in self.connections.lock().expect("lock").drain(..) {
            connection.abort();
        }
    }

    /// Listen again on the same port.
    async fn restore(&mut self) {
        let listener = loop {
            match TcpListener::bind(self.address).await {
                Ok(listener) => break listener,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        self.serve(listener);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_postgres_connection_is_backend_unavailable_until_it_returns() {
    let test = "a_lost_postgres_connection_is_backend_unavailable_until_it_returns";
    let base = postgres_base_url();
    let Ok(parsed) = reqwest::Url::parse(&base) else {
        panic!("MNEMOS_TEST_POSTGRES_URL is not a URL: {base}");
    };
    let host = parsed.host_str().unwrap_or("127.0.0.1").to_string();
    let port = parsed.port().unwrap_or(5432);
    let target = match tokio::net::lookup_host((host.as_str(), port)).await {
        Ok(mut addresses) => addresses.next(),
        Err(_) => None,
    };
    let reachable = match target {
        Some(target) => TcpStream::connect(target).await.is_ok(),
        None => false,
    };
    let Some(target) = target.filter(|_| reachable) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: PostgreSQL at {base} is unreachable under CI"
        );
        skipped(test, &format!("PostgreSQL at {base} is unreachable"));
        return;
    };
    let mut proxy = Proxy::start(target).await;
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    let schema = format!("pxy_{}", uuid::Uuid::new_v4().simple());
    let mut url = parsed.clone();
    url.set_port(Some(proxy.address.port())).expect("port");
    url.set_host(Some("127.0.0.1")).expect("host");
    url.query_pairs_mut()
        .append_pair("options", &format!("-csearch_path={schema}"));
    settings.storage.backend = "postgres".into();
    settings.storage.url = url.to_string();
    let app = spawn_with(settings, Some(temp)).await;
    app.remember("pg-agent", "the database is up", json!({}))
        .await;

    proxy.cut();
    let response = app
        .post(
            "/tools/remember",
            &json!({"agent_id": "pg-agent", "content": "written while the database is away"}),
        )
        .await;
    assert_error(
        response,
        StatusCode::SERVICE_UNAVAILABLE,
        "backend_unavailable",
        None,
    )
    .await;
    let recall = app
        .post(
            "/tools/recall",
            &json!({"agent_id": "pg-agent", "query": "database"}),
        )
        .await;
    assert!(
        recall.status() == StatusCode::OK || recall.status() == StatusCode::SERVICE_UNAVAILABLE,
        "recall while the database is away: {}",
        recall.status()
    );
    let listed = app.get("/v1/memories?agent_id=pg-agent").await;
    assert!(
        listed.status() == StatusCode::SERVICE_UNAVAILABLE,
        "listing while the database is away: {}",
        listed.status()
    );
    // Health sees the outage (it used to say `up` throughout).
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["backends"]["store"]["state"], "down", "{health}");
    assert!(health["backends"]["store"]["error"].is_string(), "{health}");

    proxy.restore().await;
    let back = eventually(Duration::from_secs(30), || async {
        app.post(
            "/tools/remember",
            &json!({"agent_id": "pg-agent", "content": "written after it came back"}),
        )
        .await
        .status()
            == StatusCode::CREATED
    })
    .await;
    assert!(back, "writes succeed again once the database is back");
    let recovered = eventually(Duration::from_secs(10), || async {
        let health = assert_status(app.get("/health").await, StatusCode::OK).await;
        health["backends"]["store"]["state"] == "up"
    })
    .await;
    assert!(recovered, "health says the store is up again");
    let listed = assert_status(
        app.get("/v1/memories?agent_id=pg-agent").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        listed["memories"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
    app.stop().await;
    // The schema is this test's own.
    crate::helpers::drop_schema_now(&schema);
}
