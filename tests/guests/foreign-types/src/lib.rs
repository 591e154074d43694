//! A foreign component whose top-level exports cover the WIT type mapping (`wit/world.wit`):
//! each function echoes or computes from its input, so a host's conversion from and to JSON
//! can be checked exactly; `big` overflows a result cap and `spin` never returns.

wit_bindgen::generate!({
    world: "foreign-types",
    path: "wit",
});

struct ForeignTypes;

impl Guest for ForeignTypes {
    fn add(a: u8, b: u8) -> u16 {
        u16::from(a) + u16::from(b)
    }

    fn shout(s: String) -> String {
        s.to_uppercase()
    }

    fn describe(p: Point) -> String {
        match p.label {
            Some(label) => format!("{label} ({}, {})", p.x, p.y),
            None => format!("({}, {})", p.x, p.y),
        }
    }

    fn pick(c: Color) -> Color {
        c
    }

    fn shape_area(s: Shape) -> f64 {
        match s {
            Shape::Circle(r) => std::f64::consts::PI * r * r,
            Shape::Square(side) => side * side,
            Shape::Empty => 0.0,
        }
    }

    fn perms(p: Permissions) -> Permissions {
        p
    }

    fn pair(t: (String, u32)) -> Vec<String> {
        vec![t.0, t.1.to_string()]
    }

    fn first_char(s: String) -> Option<char> {
        s.chars().next()
    }

    fn divide(a: i64, b: i64) -> Result<i64, String> {
        if b == 0 {
            return Err("division by zero".to_string());
        }
        a.checked_div(b).ok_or_else(|| "overflow".to_string())
    }

    fn echo_list(xs: Vec<u32>) -> Vec<u32> {
        xs
    }

    fn big(n: u32) -> Vec<u8> {
        // Wrapping on purpose: the bytes count up and start again at 0.
        (0..n).map(|i| (i % 256) as u8).collect()
    }

    fn spin() -> String {
        let mut turns: u64 = 0;
        loop {
            // Work the optimiser cannot remove, so the loop burns fuel as a real spin would.
            turns = std::hint::black_box(turns.wrapping_add(1));
        }
    }
}

export!(ForeignTypes);
