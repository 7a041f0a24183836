"""The studio's messages: engine thread -> window (the jobs' messages of spirula/engine/messages.py,
re-exported here, and the session's own: EngineReady, SceneLoaded, JobState, viewer status
and statistics, PreviewFrame through the latest-value slot, Saved, CheckpointSaved,
TrainingResumed) and the window -> engine thread commands (StartTraining ... Shutdown),
all frozen dataclasses. The window imports this module alone (``spirula.engine.studio.protocol as M``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Union

from .. import settings as _table
from ..messages import (Done, Emit, Error, Message, ProfilerSnapshot, StageFinished, StageProgress,  # noqa: F401
                        StageStarted, TrainMetrics, Warning, ignore)  # re-exported: the window's one import


# Engine -> GUI messages of the interactive session, in addition to the jobs' ones.

@dataclass(frozen=True)
class EngineReady:
    adapter: str               # e.g. "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)"
    backend: str               # "vulkan", "cuda" or "cpu"
    software: bool             # a CPU implementation of the API (lavapipe): keep scenes small
    warmup_s: float = 0.0      # device creation plus kernel compilation


@dataclass(frozen=True)
class CameraInfo:
    """A dataset camera for the viewport (frustum, look-through) and the thumbnail strip."""
    name: str
    c2w: tuple                 # 16 floats, row-major camera-to-world (OpenCV axes)
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    split: str                 # "train", "test" (held out) or "excluded"
    thumbnail: bytes = b""     # RGB888 rows, thumb_w x thumb_h
    thumb_w: int = 0
    thumb_h: int = 0
    source: str = ""           # a face of a wide image (spirula/engine/ingest/faces.py): that image's name; "": itself
    face: str = ""             # which face ("front", ...), "" for none


@dataclass(frozen=True)
class SceneLoaded:
    kind: str                  # "dataset" (training), "review" (before training), "ply" (viewing splats), "mesh",
                               # "empty" (a video or photos being reconstructed)
    name: str
    path: str
    num_gaussians: int
    center: tuple              # 3 floats: where the cameras look (orbit target)
    radius: float              # scene size in world units
    up: tuple                  # 3 floats: world up estimated from the cameras
    cameras: tuple = ()        # CameraInfo, dataset order
    project: str = ""          # project folder for outputs
    warnings: tuple = ()
    sh_degree: int = 3         # SH degree of the Gaussians (the export chooser's sizes)
    faces: int = 0             # a mesh's triangles ("mesh"; num_gaussians: its project's splats, 0 without)
    subject: tuple = ()        # 6 floats: the subject's world box (F frames it; spirula/engine/studio/framing.py), or ()
    extent: tuple = ()         # 6 floats: the whole scene's world box, cameras included (Shift+F), or ()
    pick_points: tuple = ()    # x0 y0 z0 x1 ...: a sample of the scene's points (the point under the cursor)


@dataclass(frozen=True)
class JobState:
    state: str                 # "idle", "loading", "running", "paused", "stopping", "finished", "failed"
    detail: str = ""


@dataclass(frozen=True)
class ViewerStatus:
    mode: str                  # "swapchain" (presented into the window) or "readback" (QImage)
    reason: str = ""           # why readback was chosen, when it was


@dataclass(frozen=True)
class ViewerStats:
    frames: int                # frames made since the session started
    frame_ms: float            # GPU render + compose + present (or readback) of the last frame
    width: int
    height: int
    render_scale: float = 1.0  # the splats are rendered at viewport size / render_scale


@dataclass(frozen=True)
class PreviewFrame:
    """A viewport image read back from the GPU (readback mode, screenshots): width x height
    uint32 pixels, bytes B, G, R, A (QImage.Format_RGB32). Sent through the latest-value slot.
    ``w2c`` (16 floats row-major, OpenCV axes) and ``intrinsics`` (fx, fy, cx, cy in pixels of
    this image) are the free camera the splats were rendered from, so the window can reproject
    the image for a camera that moved on since (spirula/app/view_warp.py); both () when the frame
    is not a free-camera splat view (a dataset camera's ground truth or error image)."""
    frame: int
    width: int
    height: int
    data: bytes
    tag: int = 0               # the RequestFrame this answers (0: an ordinary frame)
    w2c: tuple = ()
    intrinsics: tuple = ()


@dataclass(frozen=True)
class Saved:
    kind: str                  # "ply" or "screenshot"
    path: str
    detail: str = ""


@dataclass(frozen=True)
class CheckpointSaved:
    """The training state of ``step`` went to ``path`` (spirula/engine/checkpoint.py). ``stopped``:
    the training stopped there (Cancel with save, Shutdown with save) and the file is
    complete when this arrives; otherwise a scheduled checkpoint, written in the background."""
    path: str
    step: int
    steps: int                 # the run's total
    stopped: bool = False


@dataclass(frozen=True)
class TrainingResumed:
    """A project's training continues from its checkpoint (after SceneLoaded, before the
    loss history is replayed as TrainMetrics)."""
    checkpoint: str
    step: int                  # where it had stopped
    steps: int                 # the run's total
    project: str = ""
    saved: str = ""            # when the checkpoint was written (local time, ISO 8601)


@dataclass(frozen=True)
class CacheCleared:
    """An SfM feature/match cache was removed (spirula/engine/sfm/cache.py): asked for, or by rule."""
    project: str
    freed: int                 # bytes
    why: str


@dataclass(frozen=True)
class BoundsProposed:
    """The mesh stage (ExportMesh with ``confirm``) stopped at its bounds step: the box it would
    mesh, waiting for ConfirmBounds (or Cancel). ``bounds``: the world axis-aligned box around
    it (xmin ymin zmin xmax ymax zmax); ``frame``: the box's axes (9 floats row-major, rows in
    world coordinates: x_frame = frame @ x_world) and ``box``: its lo [3], hi [3] along them
    (what the viewport draws and drags; an object's frame has up as its third axis);
    ``mode``: "object" (its bottom cut and capped), "scene" or "explicit"; ``reason``: why
    (spirula/engine/mesh/bounds.py); ``text``: the one-line description `spirula mesh` prints."""
    project: str
    bounds: tuple
    mode: str
    reason: str
    text: str = ""
    frame: tuple = ()
    box: tuple = ()


@dataclass(frozen=True)
class MeshExported:
    """The mesh stage finished (spirula/engine/jobs/mesh.py): its files, {kind: path} as pairs
    (glb, obj, mtl, png, ply), and its counts."""
    project: str
    files: tuple               # ((kind, path), ...)
    faces: int
    vertices: int
    seconds: float


@dataclass(frozen=True)
class ProjectViewed:
    """A project opened to view (after its SceneLoaded, before its curves as TrainMetrics)."""
    project: str
    step: int                  # where its training ended
    steps: int                 # its run's total
    psnr: float | None = None  # its final held-out PSNR (metrics.json)


@dataclass(frozen=True)
class EditState:
    """The edit of the splats on view (spirula/engine/io/splat_edit.py, spirula/engine/studio/editing.py)
    after a command or a scene change: ``available`` False when the scene has no editable
    splats (a training, a mesh, nothing). ``label``: what the command did ("undo crop", ...);
    counts of Gaussians; ``crop``: the crop box's (x0, y0, z0, x1, y1, z1) world bounds or
    (); ``saved``: the edit file written ("" when none: a file outside a project)."""
    available: bool
    label: str = ""
    undo: str = ""             # the label of the command Undo would undo ("" none)
    redo: str = ""
    selected: int = 0
    kept: int = 0
    total: int = 0
    crop: tuple = ()
    saved: str = ""
    crop_box: tuple = ()       # the crop box itself: centre [3], half extents [3], rotation [3, 3] row-major


@dataclass(frozen=True)
class PartitionMessage:
    """A message of the partition job that TrainPartition runs (spirula/engine/partition/job.py:
    StageStarted / StageProgress / StageFinished per part, Warning, Error, and last Done with
    {"ply", "psnr", "num_gaussians"} or {"stopped": True}), for the partition panel."""
    message: object


StudioMessage = Union[Message, EngineReady, SceneLoaded, BoundsProposed, JobState, ViewerStatus, ViewerStats,
                      PreviewFrame, Saved, CheckpointSaved, TrainingResumed, MeshExported, ProjectViewed, EditState,
                      PartitionMessage]


# GUI -> engine: the session's control queue. The engine drains it between GPU steps and
# coalesces view changes (only the latest camera of a burst is rendered).

def _with_settings(name: str, head: list, doc: str):
    """A frozen command with the fields ``head`` and then one per setting of the table
    (spirula/engine/settings.py), each None (unset: the preset's or the default by context) unless given."""
    cls = make_dataclass(name, [*head, *[(st.name, object, field(default=None)) for st in _table.SETTINGS]],
                         frozen=True)
    cls.__module__, cls.__qualname__, cls.__doc__ = __name__, name, doc
    return cls


StartTraining = _with_settings("StartTraining", [
    ("dataset", str),
    ("project", str, field(default="")),      # the training's folder; "" = a new folder under the projects root
    ("preset", str, field(default="default")),  # spirula/engine/settings.py PRESETS: its overlay on the unset settings
    ("input_kind", str, field(default="dataset")),  # "video", "photos", "dataset": unset appearance by it
    ("held_out", tuple, field(default=())),   # image names evaluated, never trained on; () = every eval_every-th
    ("excluded", tuple, field(default=())),   # image names neither trained on nor evaluated
], """Train ``dataset`` into ``project`` with the settings given (every setting of the table
is a field; None = unset). The checkpoint goes where the project's always goes
(spirula/engine/jobs/project_layout.py checkpoint_path), every ``checkpoint_every`` steps and when stopped
with save.""")


StartPipeline = _with_settings("StartPipeline", [
    ("source", str),                          # a video file or a folder of photos
    ("project", str, field(default="")),
    ("drop_sfm_cache", bool, field(default=False)),  # remove <project>/cache/sfm once the reconstruction finished
], """Reconstruct a video or a photo folder (spirula/engine/jobs/pipeline.py stages up to undistort, on a
worker thread: no GPU there), then review and train on the result like StartTraining
(max_size and eval_every are the review's; the other settings come with StartTraining).""")


def settings_of(cmd) -> dict:
    """The settings a StartTraining / StartPipeline sets (name -> value; unset ones left out)."""
    return {st.name: getattr(cmd, st.name) for st in _table.SETTINGS if getattr(cmd, st.name) is not None}


@dataclass(frozen=True)
class ViewProject:
    """View a trained project as it ended: its mesh (with its splats to switch to) or its splats,
    its dataset's cameras, and its loss, Gaussian-count and held-out PSNR curves."""
    path: str


@dataclass(frozen=True)
class ReviewDataset:
    """Show a dataset before training it (spirula/engine/studio/review.py): cameras, thumbnails,
    notes, the held-out split and its SfM points; StartTraining then trains it."""
    dataset: str
    max_size: int = 1600
    eval_every: int = 8


@dataclass(frozen=True)
class SetSplit:
    """The split chosen in review (image names), for the viewport's frustum colours."""
    held_out: tuple = ()
    excluded: tuple = ()


@dataclass(frozen=True)
class OpenProject:
    """A project folder whose training stopped: continue from its checkpoint."""
    path: str


@dataclass(frozen=True)
class ClearSfmCache:
    """Remove the SfM cache of the project ``path`` belongs to (itself, its train/ folder, a file in it)."""
    path: str


@dataclass(frozen=True)
class OpenPly:
    path: str


@dataclass(frozen=True)
class ExportMesh:
    """Run the mesh stage (spirula/engine/jobs/mesh.py, what `spirula mesh` runs) on a trained
    project on the engine thread, then show the textured mesh; Cancel stops it."""
    project: str               # a folder with splat.ply and train.json
    faces: int = 500_000
    texture_size: int = 4096
    resolution: int = 512
    show: bool = True          # open the finished GLB in the viewport
    bounds: tuple = ()         # xmin ymin zmin xmax ymax zmax to mesh; () = auto (the orbit's subject, else the scene)
    confirm: bool = False      # stop at the bounds step: BoundsProposed, then mesh on ConfirmBounds (Cancel: nothing)


@dataclass(frozen=True)
class ConfirmBounds:
    """Go on with the mesh stage held at its bounds step (BoundsProposed): ``bounds`` () meshes
    the box proposed as it is (an object's bottom cut and capped); six floats (xmin ymin zmin xmax
    ymax zmax) the box edited by the user: along ``frame``'s axes (9 floats row-major, the
    proposal's BoundsProposed.frame) an edited object box is meshed as the proposal is (its
    bottom cut and capped); with no frame (world axes) or another proposal the box is meshed as
    `spirula mesh --bounds` numbers are (clipped, no cap) in that frame. mesh.json records the
    box as edited by the user. Cancel instead drops the stage, nothing written."""
    bounds: tuple = ()
    frame: tuple = ()


@dataclass(frozen=True)
class RenderVideo:
    """Render a video (spirula/engine/jobs/render_video.py render_video, what `spirula render` runs) of
    ``source`` (a trained project folder or a splat file) on the engine thread, with its saved
    edit applied, into the MP4 ``output``; StageProgress("video", done, total) per frame, then
    Saved("video", output); Cancel stops it and leaves no file. ``camera_path``: "orbit" or
    "keyframes"; ``keyframes``: ((c2w 16 floats row-major, OpenCV axes, vertical fov degrees),
    ...), at ``times`` (seconds, one per keyframe) or spread evenly over the duration when
    ``times`` is empty. width, height: px (even); fps; seconds."""
    source: str
    output: str
    width: int = 1280
    height: int = 720
    fps: int = 30
    seconds: float = 8.0
    camera_path: str = "orbit"
    keyframes: tuple = ()
    times: tuple = ()   # the keyframes' times in seconds; () spreads them evenly


@dataclass(frozen=True)
class SetPath:
    """Draw the video's keyframes (((c2w 16 floats row-major, OpenCV axes), vertical fov
    degrees), ...) as frustums ``size`` world units deep, images ``aspect`` wide for 1 tall,
    and its interpolated path through ``points`` ((x, y, z), ...) in the viewport (() = none)."""
    keyframes: tuple = ()
    points: tuple = ()
    size: float = 0.1
    aspect: float = 16 / 9


@dataclass(frozen=True)
class SetBounds:
    """Draw the mesh stage's box in the viewport (() = none): ``bounds`` along ``frame``'s axes
    (9 floats row-major, rows in world coordinates; (): the world's axes)."""
    bounds: tuple = ()
    highlight: int = -1        # the face (0..5) whose handle is under the mouse or dragged; -1: none
    frame: tuple = ()


@dataclass(frozen=True)
class OpenMesh:
    """Show a textured mesh (GLB, OBJ, PLY) in the viewport, drawn as triangles
    (spirula/engine/studio/mesh_view.py, mesh_raster.py), with its project's splats to switch to."""
    path: str


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Cancel:
    save: bool = True          # write the Gaussians reached so far to <project>/splat.ply, and a checkpoint


@dataclass(frozen=True)
class AttachSurface:
    """Present into a native window: platform "xcb" with handle (xdisplay, xwindow),
    "windows" with (hwnd,), or "cocoa" with (nsview,). Sizes in physical pixels."""
    platform: str
    handle: tuple
    width: int
    height: int


@dataclass(frozen=True)
class DetachSurface:
    pass


@dataclass(frozen=True)
class ResizeViewport:
    width: int                 # physical pixels
    height: int


@dataclass(frozen=True)
class SetView:
    """The viewport camera: ``w2c`` 16 floats row-major (OpenCV axes) and vertical field of
    view; ``camera`` = a dataset camera index to look through (its own pose and intrinsics)."""
    w2c: tuple
    fov_y_deg: float = 50.0
    camera: int | None = None


@dataclass(frozen=True)
class SetViewMode:
    mode: str                  # "splats", "gt" (ground truth) or "error"
    frustums: bool = True
    frustum_scale: float = 1.0  # x the default frustum size (a fraction of the cameras' spread)
    mesh: bool = True          # a mesh scene shows its triangles (False: the project's splats beside it)
    mesh_shading: str = "texture"  # "texture", "shaded" (x a headlight) or "clay" (grey, lit)


@dataclass(frozen=True)
class RequestFrame:
    readback: bool = False     # also send the frame as a PreviewFrame
    tag: int = 0               # echoed in that PreviewFrame: which request it answers


@dataclass(frozen=True)
class ExportPly:
    path: str
    format: str = "ply"        # spirula/engine/io/formats.py FORMATS: ply, compressed-ply, spz, sog, splat


@dataclass(frozen=True)
class SaveScreenshot:
    path: str


@dataclass(frozen=True)
class SetProfiling:
    on: bool                   # per-kernel GPU timestamps (spirula/engine/profile) on or off


@dataclass(frozen=True)
class EditSplats:
    """A command of the splat edit (spirula/engine/io/splat_edit.py) of the splats on view. ``op``:
    "select" (``rect`` (x0, y0, x1, y1) or ``brush`` (x0, y0, x1, y1, ...) pixels of a
    ``width`` x ``height`` view and a disc of ``radius`` pixels, seen by the camera ``w2c``
    (16 floats row-major, OpenCV axes) of vertical field of view ``fov_y_deg``; ``mode``
    "set", "add" or "remove"), "select_all", "select_none", "invert", "delete", "crop"
    (``crop``: (x0, y0, z0, x1, y1, z1) world units, axis-aligned, or 15 floats of an
    oriented box: centre [3], half extents [3], rotation [3, 3] row-major whose columns are
    the box's axes; () removes the crop),
    "undo", "redo"; "outline" draws a selection being dragged (``rect`` or ``brush``, the
    camera) and changes nothing (the next command clears it); "handles" draws the crop box's
    face handles, face ``highlight`` lit (under the mouse or dragged), the box as ``crop`` (15
    floats: a face being dragged) or, with ``crop`` (), the edit's, and changes nothing (a drag
    ends in one "crop": one undoable step)."""
    op: str
    mode: str = "set"
    rect: tuple = ()
    brush: tuple = ()
    radius: float = 0.0
    w2c: tuple = ()
    fov_y_deg: float = 50.0
    width: float = 1.0
    height: float = 1.0
    crop: tuple = ()
    highlight: int = -1


@dataclass(frozen=True)
class TrainPartition:
    """Split ``dataset`` (a COLMAP dataset) into parts by ``split`` (spirula/engine/partition/split.py
    SplitSettings), train them into ``parts_dir`` (Ray tasks, else one after another) and merge
    them into ``project``, on the engine thread (spirula/engine/studio/partitioning.py), as `spirula
    partition` does; its messages come back as PartitionMessage. Cancel stops it: the parts
    checkpoint and end (a later TrainPartition resumes them)."""
    dataset: str
    parts_dir: str
    project: str
    split: object              # SplitSettings


@dataclass(frozen=True)
class Shutdown:
    save: bool = True          # save a checkpoint and the PLY if training is under way


Command = Union[StartTraining, ReviewDataset, SetSplit, OpenProject, StartPipeline, ViewProject, OpenPly, ExportMesh,
                ConfirmBounds,
                RenderVideo, OpenMesh, Pause, Resume, Cancel, SetBounds, SetPath, AttachSurface, DetachSurface,
                ResizeViewport, SetView, SetViewMode, RequestFrame, ExportPly, SaveScreenshot, SetProfiling,
                EditSplats, TrainPartition, Shutdown]
