//! The http capability's checks: a guest request (method, URL, headers; one per line) and the
//! internal-address test on raw addresses, in every spelling of the same address.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use vak_host::capabilities::http::internal;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 4 {
        let v4 = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
        let direct = internal(IpAddr::V4(v4)).is_some();
        // An internal IPv4 address stays internal when spelled as IPv6.
        assert_eq!(
            direct,
            internal(IpAddr::V6(v4.to_ipv6_mapped())).is_some(),
            "{v4}"
        );
        let [a, b, c, d] = v4.octets();
        let nat64 = Ipv6Addr::new(
            0x64,
            0xff9b,
            0,
            0,
            0,
            0,
            u16::from_be_bytes([a, b]),
            u16::from_be_bytes([c, d]),
        );
        if direct {
            assert!(internal(IpAddr::V6(nat64)).is_some(), "{nat64}");
        }
    }
    if data.len() >= 16 {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&data[..16]);
        let _ = internal(IpAddr::V6(Ipv6Addr::from(octets)));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let method = lines.next().unwrap_or_default();
    let url = lines.next().unwrap_or_default();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    if let Ok(parsed) = vak_host::fuzzing::http_validate(method, url, &headers) {
        assert!(parsed.username().is_empty() && parsed.password().is_none());
        for (name, _) in &headers {
            let name = name.to_ascii_lowercase();
            assert!(
                ![
                    "host",
                    "content-length",
                    "transfer-encoding",
                    "connection",
                    "upgrade",
                    "te"
                ]
                .contains(&name.as_str())
            );
        }
        // A literal internal address in an accepted URL is still caught by the address check.
        if let Some(url::Host::Ipv4(v4)) = parsed.host() {
            let _ = internal(IpAddr::V4(v4));
        }
    }
});
