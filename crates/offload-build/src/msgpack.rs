//! A MessagePack reader for the AMDGPU metadata note: maps, arrays, strings, integers, booleans,
//! nil and floats (the subset LLVM writes), decoded into a small tree.

/// A decoded MessagePack value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Nil,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// The value under the string key `key` of a map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Decodes one value that fills `bytes` exactly.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    let mut reader = Reader { bytes, at: 0 };
    let value = reader.value(0)?;
    if reader.at != bytes.len() {
        return Err(format!(
            "{} bytes after the MessagePack value",
            bytes.len() - reader.at
        ));
    }
    Ok(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// Nesting deeper than this is not metadata: refuse it rather than recurse without bound.
const MAX_DEPTH: usize = 32;

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| format!("MessagePack value cut short at byte {}", self.at))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn int(&mut self, n: usize) -> Result<i128, String> {
        let raw = self.uint(n)?;
        let shift = 64 - 8 * n as u32;
        Ok((((raw << shift) as i64) >> shift) as i128)
    }

    fn string(&mut self, n: usize) -> Result<Value, String> {
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec())
            .map(Value::Str)
            .map_err(|_| "MessagePack string is not UTF-8".to_string())
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        let items = (0..n)
            .map(|_| self.value(depth + 1))
            .collect::<Result<_, _>>()?;
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        let entries = (0..n)
            .map(|_| Ok((self.value(depth + 1)?, self.value(depth + 1)?)))
            .collect::<Result<_, String>>()?;
        Ok(Value::Map(entries))
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err("MessagePack nesting too deep".into());
        }
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::Int(tag as i128),
            0x80..=0x8f => self.map((tag & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array((tag & 0x0f) as usize, depth)?,
            0xa0..=0xbf => self.string((tag & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.uint(1 << (tag - 0xc4))? as usize;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xca => Value::Float(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => Value::Int(self.uint(1 << (tag - 0xcc))? as i128),
            0xd0..=0xd3 => Value::Int(self.int(1 << (tag - 0xd0))?),
            0xd9..=0xdb => {
                let n = self.uint(1 << (tag - 0xd9))? as usize;
                self.string(n)?
            }
            0xdc | 0xdd => {
                let n = self.uint(2 << (tag - 0xdc))? as usize;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.uint(2 << (tag - 0xde))? as usize;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int((tag as i8) as i128),
            other => return Err(format!("unsupported MessagePack type 0x{other:02x}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_llvm_writes() {
        // {"a": [1, -1, 300, "xy"], "b": true, "c": {}}
        let bytes = [
            0x83, 0xa1, b'a', 0x94, 0x01, 0xff, 0xcd, 0x01, 0x2c, 0xa2, b'x', b'y', 0xa1, b'b',
            0xc3, 0xa1, b'c', 0x80,
        ];
        let v = decode(&bytes).unwrap();
        let a = v.get("a").unwrap().as_array().unwrap();
        assert_eq!(a[0].as_u64(), Some(1));
        assert_eq!(a[1], Value::Int(-1));
        assert_eq!(a[2].as_u64(), Some(300));
        assert_eq!(a[3].as_str(), Some("xy"));
        assert_eq!(v.get("b"), Some(&Value::Bool(true)));
        assert_eq!(v.get("c"), Some(&Value::Map(Vec::new())));
        assert_eq!(v.get("d"), None);
    }

    #[test]
    fn wide_forms() {
        // str8, array16, map16, int16, uint32, float64.
        let mut bytes = vec![0xde, 0x00, 0x02, 0xd9, 0x01, b'k', 0xdc, 0x00, 0x03];
        bytes.extend([0xd1, 0xff, 0x38]); // -200
        bytes.extend([0xce, 0x00, 0x01, 0x00, 0x00]); // 65536
        bytes.push(0xcb);
        bytes.extend(1.5f64.to_bits().to_be_bytes());
        bytes.extend([0xa1, b'n', 0xc0]);
        let v = decode(&bytes).unwrap();
        let k = v.get("k").unwrap().as_array().unwrap();
        assert_eq!(k, [Value::Int(-200), Value::Int(65536), Value::Float(1.5)]);
        assert_eq!(v.get("n"), Some(&Value::Nil));
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(decode(&[0x92, 0x01]).is_err(), "array cut short");
        assert!(decode(&[0xa3, b'a']).is_err(), "string cut short");
        assert!(decode(&[0x01, 0x02]).is_err(), "trailing bytes");
        assert!(decode(&[0xc1]).is_err(), "reserved tag");
        assert!(decode(&[0xa1, 0xff]).is_err(), "not UTF-8");
        assert!(decode(&[0x91; 64]).is_err(), "too deep");
    }
}
