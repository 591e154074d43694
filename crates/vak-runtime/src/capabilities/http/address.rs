//! Where a request may connect: the host resolves the name itself and refuses any internal
//! address (loopback, private, link-local, unique-local, CGNAT, unspecified, multicast,
//! documentation, IPv4-mapped or -embedded forms of those) unless the policy names that exact
//! address; it then connects to the address it checked, never resolving again.

use super::grant::HttpScope;
use crate::bindings::vak::tool::types::CapabilityError;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Why `ip` is internal, if it is.
pub fn internal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return internal_v4(v4).map(|_| "an IPv4-mapped internal address");
            }
            let s = v6.segments();
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if s[0] & 0xfe00 == 0xfc00 {
                Some("unique-local")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if s[0] & 0xff00 == 0xff00 {
                Some("multicast")
            } else if s[0] == 0x2001 && s[1] == 0x0db8 {
                Some("documentation")
            } else if s[..6] == [0, 0, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b) {
                // IPv4-compatible (deprecated) and NAT64 forms carry an IPv4 address inside.
                let v4 =
                    Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                internal_v4(v4).map(|_| "an IPv4-embedding internal address")
            } else {
                None
            }
        }
    }
}

fn internal_v4(v4: Ipv4Addr) -> Option<&'static str> {
    let o = v4.octets();
    if v4.is_loopback() {
        Some("loopback")
    } else if v4.is_private() {
        Some("private")
    } else if v4.is_link_local() {
        Some("link-local")
    } else if v4.is_unspecified() || o[0] == 0 {
        Some("this-network")
    } else if v4.is_broadcast() || v4.is_multicast() || o[0] >= 240 {
        Some("broadcast, multicast or reserved")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("shared (CGNAT)")
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        Some("benchmarking")
    } else if v4.is_documentation() || (o[0] == 192 && o[1] == 0 && o[2] == 0) {
        Some("documentation or protocol-assignment")
    } else {
        None
    }
}

/// Resolve `url`'s host and return one address to connect to, all addresses checked.
pub(super) async fn checked_address(
    scope: &HttpScope,
    url: &url::Url,
) -> Result<SocketAddr, CapabilityError> {
    let port = url.port_or_known_default().unwrap_or(80);
    let addresses: Vec<SocketAddr> = match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(url::Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| CapabilityError::Failed(format!("cannot resolve {name:?}: {e}")))?
            .collect(),
        None => return Err(CapabilityError::Invalid("the URL has no host".into())),
    };
    if addresses.is_empty() {
        return Err(CapabilityError::Failed(
            "the name resolved to no address".into(),
        ));
    }
    for a in &addresses {
        if let Some(why) = internal(a.ip())
            && !scope.allow_addresses.contains(&a.ip())
        {
            return Err(CapabilityError::Denied(format!(
                "{} resolves to {}, a {why} address the policy does not name",
                url.host_str().unwrap_or(""),
                a.ip()
            )));
        }
    }
    Ok(addresses[0])
}

#[cfg(test)]
mod tests {
    use super::internal;

    #[test]
    fn internal_addresses_in_all_their_spellings() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "ff02::1",
        ] {
            assert!(internal(bad.parse().unwrap()).is_some(), "{bad}");
        }
        for good in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(internal(good.parse().unwrap()).is_none(), "{good}");
        }
        // `0x7f.1` is how a URL may spell 127.0.0.1; the URL parser normalises it first.
        let url = url::Url::parse("http://0x7f.1/").unwrap();
        assert_eq!(url.host_str(), Some("127.0.0.1"));
    }
}
