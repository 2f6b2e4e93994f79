//! A file written at a path in three steps, so that its bytes need not cross the worker's
//! socket: the person makes a hidden temporary where the file will be ([`Op::StageAt`]),
//! the caller fills its descriptor, and the person places it ([`Op::PlaceAt`]) or
//! removes it ([`Op::DiscardAt`]). A picked file reaches the person's folder this way.
//!
//! [`Op::StageAt`]: crate::ops::Op::StageAt
//! [`Op::PlaceAt`]: crate::ops::Op::PlaceAt
//! [`Op::DiscardAt`]: crate::ops::Op::DiscardAt

use std::fs::File;

use ferry_fs::FileId;

use crate::RequestError;
use crate::ops::Executor;

impl Executor {
    /// Makes the temporary for `path`: its name, and the file open for writing.
    pub(crate) fn stage_at(&self, path: &str) -> Result<(String, File), RequestError> {
        let target = self.target_of(path, true)?;
        ferry_fs::check_placeable(&target.dir, &target.name)?;
        Ok(ferry_fs::create_temporary(&target.dir)?)
    }

    /// Places the temporary `temp` at `path`, while it is still the file `expect`.
    pub(crate) fn place_at(
        &self,
        path: &str,
        temp: &str,
        expect: FileId,
    ) -> Result<(), RequestError> {
        let target = self.target_of(path, false)?;
        Ok(ferry_fs::place_temporary(
            &target.dir,
            temp,
            &target.dir,
            &target.name,
            expect,
            target.mode,
            self.owner(),
        )?)
    }

    /// Removes the temporary `temp` made for `path`.
    pub(crate) fn discard_at(&self, path: &str, temp: &str) -> Result<(), RequestError> {
        let target = self.target_of(path, false)?;
        Ok(ferry_fs::remove_temporary(&target.dir, temp)?)
    }
}
