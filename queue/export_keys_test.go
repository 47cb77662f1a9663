package queue

// DeletedKey is deletedKey for the external tests of the scripts' keys.
var DeletedKey = deletedKey
