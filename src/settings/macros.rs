//! `declare_settings!`: from one list of settings, the flags (clap), the config file (serde),
//! the merge flag > file > default with the origin of each value, and the documentation table.
//!
//! Each setting is written once, inside its file section:
//!
//! ```text
//! (collect: CollectFile) heading "" {
//!     collect_interval: HumanDuration {
//!         flag: "collect.interval",      // --collect.interval
//!         key: "interval",               // collect.interval in the file
//!         value_name: "DURATION",
//!         help: "How often to collect from the cluster",
//!         default(HumanDuration(Duration::from_secs(15)) => "15s"), // or (unset), (computed "...")
//!         check: check_collect_interval, // optional: fn(&T) -> Result<(), String>
//!         clap(value_delimiter = ','),   // optional: more clap attributes
//!         note: "at least 1s",           // the doc table's last column
//!     }
//! }
//! ```
//!
//! `default(unset)`: none (the value is `Option`); `default(computed "...")`: worked out by
//! `config::Settings::resolve` from other values, the text is what the help and the doc say.
//! `(root)` instead of `(section: Struct)` puts the keys at the top of the file. Sections and
//! root keys appear in the file struct in the order written (serde lists them in that order
//! when it rejects an unknown key).

macro_rules! declare_settings {
    (
        $(
            $place:tt heading $heading:literal {
                $(
                    $field:ident : $ty:ty {
                        flag: $flag:literal,
                        key: $key:literal,
                        value_name: $value_name:literal,
                        help: $help:literal,
                        default($($default:tt)*),
                        $(check: $check:path,)?
                        $(clap($($clap:tt)*),)?
                        note: $note:literal,
                    }
                )*
            }
        )*
    ) => {
        /// Every setting as a flag of `serve`; `None` = not given.
        #[derive(Debug, Default, Clone, clap::Args)]
        pub struct Flags {
            $($(
                #[arg(
                    long = $flag,
                    value_name = $value_name,
                    help = declare_settings!(@help $help, ($($default)*)),
                    help_heading = heading($heading),
                    $($($clap)*)?
                )]
                pub $field: Option<$ty>,
            )*)*
        }

        $(
            declare_settings!(@section $place { $($field : $ty = $key;)* });
        )*

        declare_settings!(@file [] $($place { $($field : $ty = $key;)* })*);

        /// Every setting after the merge: the flag, else the file, else the default, each with
        /// where it came from and its check (run when the value is taken).
        #[derive(Debug, Clone)]
        pub struct Merged {
            $($(
                pub $field: declare_settings!(@merged_ty ($($default)*) $ty),
            )*)*
        }

        impl Merged {
            pub fn new(flags: &Flags, file: &FileConfig, path: &std::path::Path) -> Self {
                Self {
                    $($(
                        $field: declare_settings!(@pick ($($default)*)
                            flags.$field.clone(),
                            declare_settings!(@file_value file $place $field),
                            Names {
                                flag: $flag,
                                key: declare_settings!(@key $place $key),
                                path,
                            },
                            declare_settings!(@check $($check)?)
                        ),
                    )*)*
                }
            }
        }

        /// Every setting, for the documentation and the tests.
        pub fn table() -> Vec<SettingDoc> {
            vec![
                $($(
                    SettingDoc {
                        flag: $flag,
                        key: declare_settings!(@key $place $key),
                        default: declare_settings!(@shown ($($default)*)),
                        note: $note,
                        help: $help,
                    },
                )*)*
            ]
        }

        /// For each setting with a default: the flag, the default as documented, and whether
        /// `Flags` parsed from `--flag <documented default>` holds the default itself.
        #[cfg(test)]
        #[allow(clippy::type_complexity)]
        pub(crate) fn documented_defaults() -> Vec<(&'static str, &'static str, fn(&Flags) -> bool)> {
            let mut all: Vec<(&'static str, &'static str, fn(&Flags) -> bool)> = Vec::new();
            $($(
                declare_settings!(@documented all, $flag, $field, ($($default)*));
            )*)*
            all
        }
    };

    (@help $help:literal, (unset)) => { $help };
    (@help $help:literal, (computed $shown:literal)) => {
        concat!($help, " [default: ", $shown, "]")
    };
    (@help $help:literal, ($default:expr => $shown:literal)) => {
        concat!($help, " [default: ", $shown, "]")
    };

    (@shown (unset)) => { None };
    (@shown (computed $shown:literal)) => { Some($shown) };
    (@shown ($default:expr => $shown:literal)) => { Some($shown) };

    (@merged_ty (unset) $ty:ty) => { Optional<$ty> };
    (@merged_ty (computed $shown:literal) $ty:ty) => { Optional<$ty> };
    (@merged_ty ($default:expr => $shown:literal) $ty:ty) => { Value<$ty> };

    (@pick (unset) $flag:expr, $file:expr, $names:expr, $check:expr) => {
        Optional::pick($flag, $file, $names, $check)
    };
    (@pick (computed $shown:literal) $flag:expr, $file:expr, $names:expr, $check:expr) => {
        Optional::pick($flag, $file, $names, $check)
    };
    (@pick ($default:expr => $shown:literal) $flag:expr, $file:expr, $names:expr, $check:expr) => {
        Value::pick($flag, $file, $names, $default, $check)
    };

    (@documented $all:ident, $flag:literal, $field:ident, (unset)) => {};
    (@documented $all:ident, $flag:literal, $field:ident, (computed $shown:literal)) => {};
    (@documented $all:ident, $flag:literal, $field:ident, ($default:expr => $shown:literal)) => {
        $all.push(($flag, $shown, |flags: &Flags| {
            flags.$field.as_ref() == Some(&$default)
        }));
    };

    (@check) => { |_| Ok(()) };
    (@check $check:path) => { $check };

    (@key (root) $key:literal) => { $key };
    (@key ($section:ident : $struct:ident) $key:literal) => {
        concat!(stringify!($section), ".", $key)
    };

    (@file_value $file:ident (root) $field:ident) => { $file.$field.as_ref() };
    (@file_value $file:ident ($section:ident : $struct:ident) $field:ident) => {
        $file.$section.$field.as_ref()
    };

    (@section (root) { $($field:ident : $ty:ty = $key:literal;)* }) => {};
    (@section ($section:ident : $struct:ident) { $($field:ident : $ty:ty = $key:literal;)* }) => {
        #[doc = concat!("The `", stringify!($section), ":` section of the config file.")]
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $struct {
            $(
                #[serde(rename = $key)]
                pub $field: Option<serde_saphyr::Spanned<$ty>>,
            )*
        }
    };

    // The file struct: sections and root keys in the order written.
    (@file [$($fields:tt)*]) => {
        /// The config file, exactly as written: every key optional, unknown keys rejected.
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct FileConfig {
            $($fields)*
        }
    };
    (@file [$($fields:tt)*] (root) { $($field:ident : $ty:ty = $key:literal;)* } $($rest:tt)*) => {
        declare_settings!(@file [
            $($fields)*
            $(
                #[serde(rename = $key)]
                pub $field: Option<serde_saphyr::Spanned<$ty>>,
            )*
        ] $($rest)*);
    };
    (@file [$($fields:tt)*] ($section:ident : $struct:ident) { $($body:tt)* } $($rest:tt)*) => {
        declare_settings!(@file [
            $($fields)*
            #[serde(default)]
            pub $section: $struct,
        ] $($rest)*);
    };
}
