//! A fake OpenAI-compatible server on a loopback socket, for tests (feature `test-server`):
//! prod-remote's own tests and those of the crates that sample through it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// (path, JSON body, request number) → (HTTP status, response body).
pub type Handler = dyn Fn(&str, &Value, usize) -> (u16, String) + Send + Sync;

/// A minimal HTTP/1.1 server: each connection carries one request (the client may reuse it; we
/// serve requests on it until it closes). Records (path, body) and the peak of requests in flight.
pub struct Fake {
    pub url: String,
    /// (path, body) of every request, in arrival order.
    pub log: Arc<Mutex<Vec<(String, Value)>>>,
    /// The most requests in flight at once.
    pub peak: Arc<AtomicUsize>,
}

/// Serve `handler` until the process ends.
pub fn serve(handler: Arc<Handler>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(vec![]));
    let peak = Arc::new(AtomicUsize::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let count = Arc::new(AtomicUsize::new(0));
    {
        let log = log.clone();
        let peak = peak.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (handler, log, peak, in_flight, count) = (
                    handler.clone(),
                    log.clone(),
                    peak.clone(),
                    in_flight.clone(),
                    count.clone(),
                );
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                        let mut len = 0usize;
                        loop {
                            let mut h = String::new();
                            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            if h == "\r\n" {
                                break;
                            }
                            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                len = v.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0u8; len];
                        reader.read_exact(&mut body).unwrap();
                        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        log.lock().unwrap().push((path.clone(), body.clone()));
                        let n = count.fetch_add(1, Ordering::SeqCst);
                        let (status, text) = handler(&path, &body, n);
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        let resp = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                            text.len()
                        );
                        if stream.write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
    }
    Fake { url, log, peak }
}
