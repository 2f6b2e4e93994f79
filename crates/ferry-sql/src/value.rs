//! The values that cross the interface, whichever engine is behind it: parameters in,
//! rows out. Both engines keep integers as 64 bits (`BIGINT` on PostgreSQL), text as
//! UTF-8 and bytes as bytes; a flag is an integer 0 or 1 on both.

use crate::Error;

/// One parameter or column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL `NULL`.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "bytes",
        }
    }
}

/// A type a parameter can be made from; `params![]` takes each by reference, so
/// nothing given to it is moved.
pub trait ToValue {
    /// The parameter.
    fn to_value(&self) -> Value;
}

macro_rules! int_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value {
                Value::Int(i64::from(*self))
            }
        }
    )*};
}
int_to_value!(i64, i32, u32, u16, u8, bool);

impl ToValue for u64 {
    /// Sizes and counts past `i64::MAX` do not occur; saturating keeps a bad one visible.
    fn to_value(&self) -> Value {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToValue for usize {
    fn to_value(&self) -> Value {
        (*self as u64).to_value()
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Real(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_owned())
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}

impl<const N: usize> ToValue for [u8; N] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

/// Parameters for a statement: `params![a, b]` for `?1` and `?2`, each taken by
/// reference.
#[macro_export]
macro_rules! params {
    () => { &[] as &[$crate::Value] };
    ($($v:expr),+ $(,)?) => { &[$($crate::ToValue::to_value(&$v)),+] as &[$crate::Value] };
}

/// One row of a result, its columns in the order the statement named them.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub(crate) Vec<Value>);

impl Row {
    /// Column `index` (from 0) as `T`; a mismatch is an error naming the column.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T, Error> {
        let value = self.0.get(index).ok_or_else(|| Error::Column {
            index,
            why: format!("the row has {} columns", self.0.len()),
        })?;
        T::from_value(value).map_err(|why| Error::Column { index, why })
    }

    /// How many columns.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the row has no columns.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The columns, as values.
    pub fn values(&self) -> &[Value] {
        &self.0
    }
}

/// A type a column can be read as.
pub trait FromValue: Sized {
    /// Converts, or says why not.
    fn from_value(value: &Value) -> Result<Self, String>;
}

fn mismatch(want: &str, got: &Value) -> String {
    format!("expected {want}, found {}", got.kind())
}

impl FromValue for i64 {
    fn from_value(value: &Value) -> Result<i64, String> {
        match value {
            Value::Int(v) => Ok(*v),
            other => Err(mismatch("an integer", other)),
        }
    }
}

macro_rules! from_int_column {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: &Value) -> Result<$t, String> {
                let v = i64::from_value(value)?;
                <$t>::try_from(v).map_err(|_| format!("{v} is out of range for {}", stringify!($t)))
            }
        }
    )*};
}
from_int_column!(i32, u32, u64, usize, u16, u8);

impl FromValue for bool {
    fn from_value(value: &Value) -> Result<bool, String> {
        Ok(i64::from_value(value)? != 0)
    }
}

impl FromValue for f64 {
    fn from_value(value: &Value) -> Result<f64, String> {
        match value {
            Value::Real(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            other => Err(mismatch("a real", other)),
        }
    }
}

impl FromValue for String {
    fn from_value(value: &Value) -> Result<String, String> {
        match value {
            Value::Text(v) => Ok(v.clone()),
            other => Err(mismatch("text", other)),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: &Value) -> Result<Vec<u8>, String> {
        match value {
            Value::Blob(v) => Ok(v.clone()),
            other => Err(mismatch("bytes", other)),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value) -> Result<Option<T>, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

impl FromValue for Value {
    fn from_value(value: &Value) -> Result<Value, String> {
        Ok(value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_convert_or_say_why_not() {
        let row = Row(vec![
            Value::Int(7),
            Value::Null,
            Value::Text("a".into()),
            Value::Int(-1),
        ]);
        assert_eq!(row.get::<i64>(0).unwrap(), 7);
        assert!(row.get::<bool>(0).unwrap());
        assert_eq!(row.get::<Option<String>>(1).unwrap(), None);
        assert_eq!(row.get::<String>(2).unwrap(), "a");
        assert!(
            row.get::<i64>(2)
                .unwrap_err()
                .to_string()
                .contains("column 2")
        );
        assert!(row.get::<u64>(3).is_err(), "a negative is no size");
        assert!(row.get::<i64>(4).is_err(), "past the last column");
    }

    #[test]
    fn parameters_convert() {
        let name = String::from("ann");
        let p = params![
            1i64,
            "x",
            &name,
            None::<i64>,
            Some(3u32),
            true,
            &[1u8, 2][..]
        ];
        assert_eq!(
            p,
            &[
                Value::Int(1),
                Value::Text("x".into()),
                Value::Text("ann".into()),
                Value::Null,
                Value::Int(3),
                Value::Int(1),
                Value::Blob(vec![1, 2]),
            ]
        );
        assert_eq!(u64::MAX.to_value(), Value::Int(i64::MAX));
    }
}
