"""Where ceiling writes, and how, so that a path someone else controls cannot turn a
write into damage: the rules for a report path (``output``: a regular file is
replaced atomically, a device or FIFO written through, a disk or a directory
refused) and for the directories ceiling makes and removes (``private``: a parent
no one else can rename entries in, 0700, removal that never follows a link).
Run as root on compute nodes, these are what keep ``--save-json /dev/null`` or a
hostile $TMPDIR from writing where no one asked."""
