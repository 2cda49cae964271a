//! The peer channel takes only requests signed with the shared secret,
//! each once, of bounded size, and the asker takes only signed replies.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use weft_peer::{Error, Handler, Peer, Refusal, Secret, serve, server::MAX_REQUEST};

const KEY: &[u8] = b"a shared secret of some length";

fn echo_server() -> SocketAddr {
    let handler: Handler = Arc::new(|path: &str, body: &[u8]| {
        if path == "/refuse" {
            return Err(Refusal {
                status: 400,
                message: "refused as asked".into(),
            });
        }
        Ok([path.as_bytes(), b":", body].concat())
    });
    serve(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(Secret::from_bytes(KEY)),
        handler,
    )
    .unwrap()
}

/// A raw HTTP request signed as the client signs one.
fn raw(addr: SocketAddr, secret: &Secret, nonce: &str, body: &[u8]) -> String {
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let mac = secret.sign(&[
        b"request",
        b"POST",
        b"/echo",
        time.as_bytes(),
        nonce.as_bytes(),
        body,
    ]);
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /echo HTTP/1.1\r\nHost: x\r\nx-weft-signature: {time}.{nonce}.{mac}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
}

#[test]
fn a_signed_request_is_answered_and_its_reply_checked() {
    let addr = echo_server();
    let peer = Peer::new(&addr.to_string(), Arc::new(Secret::from_bytes(KEY))).unwrap();
    assert_eq!(
        peer.post("/echo", b"hello".to_vec()).unwrap(),
        b"/echo:hello"
    );
    let error = peer.post("/refuse", Vec::new()).unwrap_err();
    assert!(
        matches!(error, Error::Refused { status: 400, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("refused as asked"), "{error}");
}

#[test]
fn another_secret_is_refused_both_ways() {
    let addr = echo_server();
    let stranger = Peer::new(
        &addr.to_string(),
        Arc::new(Secret::from_bytes(b"not the shared secret at all")),
    )
    .unwrap();
    let error = stranger.post("/echo", b"hello".to_vec()).unwrap_err();
    assert!(
        matches!(error, Error::Refused { status: 401, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("unsigned reply"), "{error}");
}

#[test]
fn a_replayed_request_is_refused() {
    let addr = echo_server();
    let secret = Secret::from_bytes(KEY);
    let first = raw(addr, &secret, "00112233445566778899aabbccddeeff", b"once");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.ends_with("/echo:once"), "{first}");
    let again = raw(addr, &secret, "00112233445566778899aabbccddeeff", b"once");
    assert!(again.starts_with("HTTP/1.1 401"), "{again}");
    assert!(again.contains("replayed"), "{again}");
}

#[test]
fn an_oversized_request_is_refused_unread() {
    let addr = echo_server();
    let peer = Peer::new(&addr.to_string(), Arc::new(Secret::from_bytes(KEY))).unwrap();
    let error = peer.post("/echo", vec![b'x'; MAX_REQUEST + 1]).unwrap_err();
    assert!(
        matches!(error, Error::Refused { status: 413, .. } | Error::Http(_)),
        "{error}"
    );
}
