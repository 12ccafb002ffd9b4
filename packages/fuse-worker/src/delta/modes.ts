// Mode bits the delta layer lets through.

/**
 * Permission bits a sandbox may give a non-directory: never setuid/setgid. The sandbox user owns every
 * file it sees, so it could set them, and commit would then plant a set-id program in the codebase, owned
 * by the codebase's owner (root, typically). Stripped when the upper file is made and again at commit.
 */
export const FILE_MODE_BITS = 0o1777;
